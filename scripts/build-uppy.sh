#!/usr/bin/env bash
# Vendor Uppy for the upload page: for maintainers only. CI and a bare clone
# never run this: the built files are committed under
# attachments/static/airlock/vendor/uppy/ and tests/pages/test_uppy_bundle.py
# checks them against SHA256SUMS and the lockfile.
#
#   scripts/build-uppy.sh            rebuild the vendored files in place
#   scripts/build-uppy.sh --check    rebuild into a temporary directory and
#                                    fail if it differs from what is committed
#
# What it does: the versions are pinned in scripts/uppy/package.json and their
# tarballs' sha512 in scripts/uppy/package-lock.json. `npm pack` fetches the two
# tarballs the page needs (`uppy`: the prebuilt bundle dist/uppy.min.js and
# uppy.min.css; `@uppy/locales`: dist/<lang>.min.js), the script checks each
# tarball's integrity against the lockfile, and copies the files as they are
# (no transpiling, no minifying: byte for byte what the Uppy release ships),
# with the MIT licence, then writes SHA256SUMS.
#
# To move to another Uppy release: change the two versions in package.json (the
# `@uppy/locales` version must be the one `uppy`'s own package.json depends on,
# so the bundle and its locales are one release), run
# `npm install --package-lock-only --ignore-scripts` in scripts/uppy, then this
# script, then the browser tests (tests/browser/test_upload_page*.py).
# Needs node and npm (registry access); nothing is installed globally.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
pins=$root/scripts/uppy
dest=$root/attachments/static/airlock/vendor/uppy

check=0
if [ "${1:-}" = "--check" ]; then check=1; fi

work="$(mktemp -d -t airlock-uppy-XXXXXX)"
trap 'rm -rf "$work"' EXIT
out=$work/out
mkdir -p "$out/locales" "$work/tgz"

# name, version and sha512 integrity of a package, as the lockfile pins them
pinned() {
  node -e '
    const lock = require(process.argv[1]);
    const entry = lock.packages["node_modules/" + process.argv[2]];
    if (!entry) { console.error("not in the lockfile: " + process.argv[2]); process.exit(1); }
    console.log(entry.version + " " + entry.integrity);
  ' "$pins/package-lock.json" "$1"
}

fetch() {  # fetch NAME → extracts to $work/NAME, prints "version integrity"
  local name=$1 version integrity file got
  read -r version integrity < <(pinned "$name")
  file=$(cd "$work/tgz" && npm pack --silent "$name@$version")
  got="sha512-$(openssl dgst -sha512 -binary "$work/tgz/$file" | base64 -w0)"
  if [ "$got" != "$integrity" ]; then
    echo "integrity mismatch for $name@$version: lockfile $integrity, tarball $got" >&2
    exit 1
  fi
  mkdir -p "$work/$name"
  tar -xzf "$work/tgz/$file" -C "$work/$name"
  echo "$version $integrity"
}

read -r uppy_version uppy_integrity < <(fetch uppy)
read -r locales_version locales_integrity < <(fetch @uppy/locales)

# One release: the bundle's own package.json names the locales it was built with.
wanted=$(node -e 'console.log(require(process.argv[1]).dependencies["@uppy/locales"])' "$work/uppy/package/package.json")
if [ "$wanted" != "$locales_version" ]; then
  echo "uppy@$uppy_version depends on @uppy/locales@$wanted, the pin is $locales_version" >&2
  exit 1
fi

cp "$work/uppy/package/dist/uppy.min.js" "$work/uppy/package/dist/uppy.min.css" "$out/"
cp "$work/uppy/package/LICENSE" "$out/LICENSE"
for f in "$work/@uppy/locales/package/dist/"*.min.js; do
  cp "$f" "$out/locales/"
done
cmp -s "$work/uppy/package/LICENSE" "$work/@uppy/locales/package/LICENSE" \
  || cp "$work/@uppy/locales/package/LICENSE" "$out/locales/LICENSE"

{
  echo "# uppy@$uppy_version $uppy_integrity"
  echo "# @uppy/locales@$locales_version $locales_integrity"
  (cd "$out" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum)
} > "$out/SHA256SUMS"

if [ $check = 1 ]; then
  # README.md is written by hand; everything else must be what this script makes.
  if diff -r --exclude=README.md "$out" "$dest" >/dev/null; then
    echo "vendored Uppy $uppy_version matches a fresh build"
  else
    diff -rq --exclude=README.md "$out" "$dest" || true
    echo "vendored Uppy differs from a fresh build of uppy@$uppy_version" >&2
    exit 1
  fi
  exit 0
fi

mkdir -p "$dest"
find "$dest" -mindepth 1 ! -name README.md -delete
cp -r "$out/." "$dest/"
echo "vendored uppy@$uppy_version and @uppy/locales@$locales_version into ${dest#"$root"/}"
