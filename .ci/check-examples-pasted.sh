#!/usr/bin/env bash
# Checks that every example compiles pasted into an app of its own: each example's dependency
# block (the ```toml block in its header docs, what a user copies into Cargo.toml) and the file
# as `src/main.rs` make a crate that depends on the published facade (from its package, as
# unpacked by check-packages.sh into DIR/check) and on nothing else of this repository: no
# testkit, no shared module, no per-crate path the facade does not give. Each crate is checked
# alone, with the features its block names (no unification with the others).
# Usage: .ci/check-examples-pasted.sh DIR CRATE...   (DIR and CRATEs as for check-packages.sh)
set -euo pipefail
dir="$(cd "${1:?usage: check-examples-pasted.sh DIR CRATE...}" && pwd)"
shift
repo="$(cd "$(dirname "$0")/.." && pwd)"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n 1)"
work="$dir/paste"
rm -rf "$work"
mkdir -p "$work"

members=()
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
  mkdir -p "$work/$crate/src"
  cp "$example" "$work/$crate/src/main.rs"
  {
    echo "[package]"
    echo "name = \"$crate\""
    echo 'version = "0.0.0"'
    echo 'edition = "2024"'
    echo 'publish = false'
    echo
    echo "$block"
  } >"$work/$crate/Cargo.toml"
  members+=("\"$crate\"")
done

{
  echo "[workspace]"
  echo "members = [$(IFS=,; echo "${members[*]}")]"
  echo 'resolver = "2"'
  echo
  echo "[patch.crates-io]"
  for crate in "$@"; do
    echo "$crate = { path = \"../check/$crate-$version\" }"
  done
  echo
  echo '[profile.dev.package."*"]'
  echo 'debug = "line-tables-only"'
} >"$work/Cargo.toml"
cp "$repo/Cargo.lock" "$work/Cargo.lock"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
for member in "${members[@]}"; do
  crate="${member//\"/}"
  echo "checking ${crate#paste-} pasted into an app of its own"
  cargo check -q --offline --manifest-path "$work/Cargo.toml" -p "$crate"
done
