#!/usr/bin/env bash
# Create .venv (if missing) and install Airlock with the pinned versions.
# Usage: scripts/bootstrap.sh [--test]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || {
    echo "bootstrap: Python 3.11 or newer is required ($PYTHON is $("$PYTHON" -V 2>&1)); set PYTHON=/path/to/python3.11" >&2
    exit 1
  }
  "$PYTHON" -m venv .venv
fi
extras=""
[ "${1:-}" = "--test" ] && extras="[test]"
stamp=".venv/.airlock-installed${extras}"
# Reinstall only when the dependency files changed since the last install.
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ] \
   || [ clients/python/pyproject.toml -nt "$stamp" ]; then
  echo "bootstrap: installing Airlock's Python dependencies${extras:+ (with the test extras)} into .venv" >&2
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -c constraints.txt -e ".${extras}"
  if [ -n "$extras" ]; then
    # The Python client (clients/python, its own package) is tested against serve in tests/client.
    .venv/bin/python -m pip install --quiet -c constraints.txt -e clients/python
  fi
  touch "$stamp"
fi
# The sandbox's decoders inflate with zlib-ng when it is built (about twice as fast
# on PNG, PDF and ZIP streams); without a compiler they use the system zlib.
if ! scripts/build-zlib-ng.sh; then
  echo "bootstrap: zlib-ng not built; the sandbox inflates with the system zlib (slower)" >&2
fi
