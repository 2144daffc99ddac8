#!/usr/bin/env bash
# Install the system packages the test suite needs, from Debian/Ubuntu's apt,
# when they are missing (used by scripts/test and .ci/run; idempotent, and
# touches nothing when everything is there):
#
#   python3.11-venv    `python3.11 -m venv` for .venv (Debian ships it separately; the
#                      version is that of $PYTHON, default python3.11)
#   gcc, make          to build zlib-ng for the sandbox's decoders (scripts/build-zlib-ng.sh)
#   libseccomp2        the sandbox's seccomp layer (pyseccomp loads libseccomp.so.2)
#   curl               the health probe of scripts/schemathesis.sh and the README walk-through
#   clamav-daemon      clamd, run privately by scripts/clamd.sh with the test signatures in scripts/clamd/
#   clamav-testfiles   ClamAV's test files, scanned by tests/scanners
#   chromium           the browser tests (Playwright drives Debian's Chromium; it never downloads one)
#
# Prints one line saying what it installs (or that nothing is missing). Needs
# root, or sudo, only when something is missing. PostgreSQL and Redis are not
# installed here: the test command expects them running (scripts/services.sh
# starts them if they are installed but stopped).
#
# Usage: scripts/install-system-deps.sh [PACKAGE…]   (default: all of the above)
set -euo pipefail
cd "$(dirname "$0")/.."

have() { command -v "$1" >/dev/null 2>&1; }

# The Python scripts/bootstrap.sh makes .venv with, and the apt package that gives it `venv`.
python=${PYTHON:-python3.11}
have "$python" || python=python3
venv_package="python$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)-venv"

# Whether a package's purpose is already served (the binary may come from elsewhere).
present() {
  case "$1" in
    # Debian and Ubuntu move ensurepip (what `venv` installs pip with) into that package.
    python3*-venv) [ -x .venv/bin/python ] || "$python" -c 'import ensurepip, venv' >/dev/null 2>&1 ;;
    gcc) have cc ;;
    libseccomp2) /sbin/ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || dpkg -s libseccomp2 >/dev/null 2>&1 ;;
    make) have make ;;
    curl) have curl ;;
    clamav-daemon) have clamd || [ -x /usr/sbin/clamd ] ;;
    clamav-testfiles) [ -d /usr/share/clamav-testfiles ] ;;
    chromium) [ -x "${AIRLOCK_CHROMIUM:-/usr/bin/chromium}" ] ;;
    *) dpkg -s "$1" >/dev/null 2>&1 ;;
  esac
}

wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=("$venv_package" gcc make libseccomp2 curl clamav-daemon clamav-testfiles chromium)
missing=()
for package in "${wanted[@]}"; do
  present "$package" || missing+=("$package")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-system-deps: nothing to install (${wanted[*]} present)"
  exit 0
fi
echo "install-system-deps: installing ${missing[*]} with apt-get (for the test suite)"

sudo=()
if [ "$(id -u)" != 0 ]; then
  if have sudo; then
    sudo=(sudo)
  else
    echo "install-system-deps: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
if ! have apt-get; then
  echo "install-system-deps: apt-get not found (Debian/Ubuntu expected); install: ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
log=$(mktemp -t airlock-apt-XXXXXX.log)
trap 'rm -f "$log"' EXIT
# Try the package index as it is first (fast, works offline with a warm cache), then refresh it.
if ! "${sudo[@]}" apt-get install -y -q "${missing[@]}" >"$log" 2>&1; then
  if ! { "${sudo[@]}" apt-get update -q && \
         "${sudo[@]}" apt-get install -y -q "${missing[@]}"; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "install-system-deps: apt-get could not install ${missing[*]}" >&2
    exit 1
  fi
fi
for package in "${missing[@]}"; do
  if ! present "$package"; then
    echo "install-system-deps: $package was installed but is still not usable" >&2
    exit 1
  fi
done
echo "install-system-deps: installed ${missing[*]}"
