#!/usr/bin/env bash
# Checks that the published crates build from their packages, each alone (what `cargo package`
# verifies, without building each in full), and lints them there: unpacks
# DIR/<crate>-<version>.crate for each CRATE into DIR/check, makes them a workspace of their
# own whose crates.io entries for these crates point at the unpacked packages, and runs clippy
# on each crate alone (its own feature resolution: a facade with its default features, a
# synchronizer crate as a user who adds just it gets it) with this repository's lock file
# (the same dependency versions, so the target dir's builds of them are shared).
# Usage: .ci/check-packages.sh DIR CRATE...
set -euo pipefail
dir="$(cd "${1:?usage: check-packages.sh DIR CRATE...}" && pwd)"
shift
repo="$(cd "$(dirname "$0")/.." && pwd)"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n 1)"
work="$dir/check"
rm -rf "$work"
mkdir -p "$work"

members=()
patches=()
for crate in "$@"; do
  archive="$dir/$crate-$version.crate"
  [ -f "$archive" ] || { echo "no package $archive"; exit 1; }
  tar -xzf "$archive" -C "$work"
  members+=("\"$crate-$version\"")
  patches+=("$crate = { path = \"$crate-$version\" }")
done

{
  echo "[workspace]"
  echo "members = [$(IFS=,; echo "${members[*]}")]"
  echo 'resolver = "2"'
  echo
  echo "[patch.crates-io]"
  printf '%s\n' "${patches[@]}"
  echo
  # As the repository's own workspace builds them, so that their builds are shared.
  echo '[profile.dev.package."*"]'
  echo 'debug = "line-tables-only"'
} >"$work/Cargo.toml"
cp "$repo/Cargo.lock" "$work/Cargo.lock"

# Every package's Lua scripts travel inside it (each crate reads them with include_str!).
for crate in "$@"; do
  if [ -d "$repo/crates/$crate/lua" ]; then
    for script in "$repo/crates/$crate/lua"/*.lua; do
      [ -f "$work/$crate-$version/lua/$(basename "$script")" ] || {
        echo "$crate's package lacks lua/$(basename "$script")"
        exit 1
      }
    done
  fi
done

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
for crate in "$@"; do
  echo "checking $crate alone, from its package"
  cargo clippy -q --offline --manifest-path "$work/Cargo.toml" -p "$crate" -- -D warnings
done
