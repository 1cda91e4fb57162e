#!/usr/bin/env bash
# Checks that the published crates build from their packages, each alone (what `cargo package`
# verifies, without building each in full), and lints them there: unpacks
# DIR/<crate>-<version>.crate for each CRATE into DIR/check, makes them a workspace of their
# own whose crates.io entries for these crates point at the unpacked packages, and runs clippy
# on each crate alone (its own feature resolution: a facade with its default features, a
# synchronizer crate as a user who adds just it gets it) with this repository's lock file
# (the same dependency versions, so the target dir's builds of them are shared).
#
# Then every example, pasted into an app of its own: each example's dependency block (the
# ```toml block in its header docs, what a user copies into Cargo.toml) and the file as
# `src/main.rs` make a crate that depends on the packaged facade (and on nothing else of this
# repository: no testkit, no shared module, no per-crate path the facade does not give), in a
# workspace of their own (DIR/paste) with the same crates.io entries; each is checked alone,
# with the features its block names.
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
for crate in "$@"; do
  archive="$dir/$crate-$version.crate"
  [ -f "$archive" ] || { echo "no package $archive"; exit 1; }
  # Extracted with the current time: the packages all carry one fixed mtime, which a target
  # dir that built an earlier package of the same version would take for fresh.
  tar -xzmf "$archive" -C "$work"
  members+=("\"$crate-$version\"")
done

# `manifest MEMBERS PREFIX`: a workspace of MEMBERS (a TOML list's items) whose crates.io entries
# for the packaged crates point at PREFIX<crate>-<version>, their debug info as the
# repository's own workspace builds them (so that their builds are shared).
manifest() {
  echo "[workspace]"
  echo "members = [$1]"
  echo 'resolver = "2"'
  echo
  echo "[patch.crates-io]"
  for crate in "${crates[@]}"; do
    echo "$crate = { path = \"$2$crate-$version\" }"
  done
  echo
  echo '[profile.dev.package."*"]'
  echo 'debug = "line-tables-only"'
}
crates=("$@")
manifest "$(IFS=,; echo "${members[*]}")" "" >"$work/Cargo.toml"
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

paste="$dir/paste"
rm -rf "$paste"
mkdir -p "$paste"
pastes=()
for example in "$repo"/examples/*.rs "$repo"/crates/*/examples/*.rs; do
  name="$(basename "$example" .rs)"
  crate="paste-${name//_/-}"
  block="$(awk '/^\/\/! ```toml$/ { on = 1; next } on && /^\/\/! ```$/ { exit } on { sub(/^\/\/! ?/, ""); print }' "$example")"
  if ! grep -q '^ferrisson = ' <<<"$block"; then
    echo "$example has no dependency block naming the facade (a \`\`\`toml block in its header docs)"
    exit 1
  fi
  if grep -q '^ferrisson-' <<<"$block"; then
    echo "$example depends on a ferrisson crate other than the facade"
    exit 1
  fi
  mkdir -p "$paste/$crate/src"
  cp "$example" "$paste/$crate/src/main.rs"
  {
    echo "[package]"
    echo "name = \"$crate\""
    echo 'version = "0.0.0"'
    echo 'edition = "2024"'
    echo 'publish = false'
    echo
    echo "$block"
  } >"$paste/$crate/Cargo.toml"
  pastes+=("\"$crate\"")
done

manifest "$(IFS=,; echo "${pastes[*]}")" "../check/" >"$paste/Cargo.toml"
cp "$repo/Cargo.lock" "$paste/Cargo.lock"

for member in "${pastes[@]}"; do
  crate="${member//\"/}"
  echo "checking ${crate#paste-} pasted into an app of its own"
  cargo check -q --offline --manifest-path "$paste/Cargo.toml" -p "$crate"
done
