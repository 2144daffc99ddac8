#!/usr/bin/env bash
# Build zlib-ng in zlib-compatible mode into .venv/lib/airlock-zlib-ng/libz.so.1.
#
# The sandbox's fork server loads it in place of the system zlib (see
# processing/sandbox/runner.py): Pillow's PNG decoder and Python's zlib module
# (pypdf streams, ZIP members) then inflate about twice as fast. zlib-ng picks
# its SIMD code at run time, so the build is portable across x86-64 CPUs.
# Needs a C compiler and make; without them the sandbox keeps the system zlib.
# Usage: scripts/build-zlib-ng.sh [--force]
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.venv/lib/airlock-zlib-ng
source_pin=scripts/zlib-ng-source.txt
stamp="$dest/.built-from"
if [ "${1:-}" != "--force" ] && [ -f "$dest/libz.so.1" ] && cmp -s "$source_pin" "$stamp"; then
  exit 0
fi
for tool in cc make; do
  command -v "$tool" >/dev/null 2>&1 || { echo "build-zlib-ng: '$tool' not found; the sandbox keeps the system zlib" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
.venv/bin/python -m pip download --quiet --no-deps --no-binary :all: --require-hashes \
  -r "$source_pin" -d "$work"
tar xzf "$work"/zlib_ng-*.tar.gz -C "$work"
src=$(echo "$work"/zlib_ng-*/src/zlib_ng/zlib-ng)
(
  cd "$src"
  ./configure --zlib-compat >/dev/null
  make -j"$(nproc 2>/dev/null || echo 2)" shared >/dev/null
)
mkdir -p "$dest"
rm -f "$dest"/libz.so*
cp -P "$src"/libz.so.1 "$src"/libz.so.1.* "$dest"/
cp "$source_pin" "$stamp"
echo "build-zlib-ng: $(readlink "$dest/libz.so.1") in $dest"
