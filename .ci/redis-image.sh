#!/usr/bin/env bash
# Builds a Redis image from the machine's own redis-server (for machines that reach no image
# registry): the binary, redis-cli and the libraries ldd names, in a folder, imported with
# redis-server as the entrypoint. Usage: .ci/redis-image.sh [tag] (default ferrisson-test/redis:7)
set -euo pipefail
tag="${1:-ferrisson-test/redis:7}"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/local/bin" "$root/tmp"
for bin in redis-server redis-cli; do
  path="$(command -v "$bin")"
  # Debian's redis-server is a symlink to redis-check-rdb: copy what it points at.
  cp -L "$path" "$root/usr/local/bin/$bin"
  for lib in $(ldd "$path" | grep -oE '/[^ ]+'); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
done
tar -C "$root" -c . | docker import -c 'ENTRYPOINT ["/usr/local/bin/redis-server"]' - "$tag" >/dev/null
echo "built $tag"
