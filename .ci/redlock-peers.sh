#!/usr/bin/env bash
# Installs the Redlock peers of the interop tests (crates/ferrisson-interop) into DIR: PyPI `redis`
# (its Lock) in a venv, npm `redlock` over ioredis, each beside its driver script from
# crates/ferrisson-interop/peers. Idempotent: what is there already is kept. The tests run it on first use (under a
# lock); .ci/run runs it up front. Needs python3 with venv and pip, node with npm, and the
# registries (PyPI, npm).
set -euo pipefail
dir="${1:?usage: redlock-peers.sh DIR}"
src="$(cd "$(dirname "$0")/../crates/ferrisson-interop/peers" && pwd)"
mkdir -p "$dir/python" "$dir/node"

if ! "$dir/python/venv/bin/python" -c 'import redis' >/dev/null 2>&1; then
  rm -rf "$dir/python/venv"
  python3 -m venv "$dir/python/venv"
  "$dir/python/venv/bin/pip" install --quiet --disable-pip-version-check redis==8.2.0
fi
cp "$src/redlock_peer.py" "$dir/python/"

# Node resolves a script's imports from the script's own directory: the script lives beside
# node_modules.
cp "$src/package.json" "$src/redlock_peer.mjs" "$dir/node/"
if [ ! -d "$dir/node/node_modules/redlock" ] || [ ! -d "$dir/node/node_modules/ioredis" ]; then
  (cd "$dir/node" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
fi
