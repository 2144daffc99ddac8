#!/usr/bin/env bash
# Fuzz the running API against its own OpenAPI schema with Schemathesis.
#
#   scripts/schemathesis.sh [extra schemathesis arguments]
#
# Starts `manage.py serve` on a free loopback port with a temporary
# AIRLOCK_DATA_DIR (SQLite there, unless DATABASE_URL is given), creates a
# user with `manage.py createuser` (its token is the last stdout line), then
# runs every operation of http://127.0.0.1:PORT/api/v1/schema — examples,
# coverage, fuzzing and stateful phases (links) — with the checks
# not_a_server_error, status_code_conformance, content_type_conformance and
# response_schema_conformance. Storage events are fuzzed in a second run with
# their own bearer token. Exits non-zero on any failure; the server is always
# stopped.
#
# Environment: SCHEMATHESIS_MAX_EXAMPLES (default 30), SCHEMATHESIS_SEED,
# SCHEMATHESIS_WORKERS (default 2); DATABASE_URL, REDIS_URL, CLAMD_SOCKET…
# are passed to the server as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh --test

PY=.venv/bin/python
ST=.venv/bin/schemathesis
MAX_EXAMPLES=${SCHEMATHESIS_MAX_EXAMPLES:-30}
WORKERS=${SCHEMATHESIS_WORKERS:-2}
CHECKS=not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance

work="$(mktemp -d -t airlock-schemathesis-XXXXXX)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

export AIRLOCK_DATA_DIR="$work/data"
export DJANGO_SETTINGS_MODULE=config.settings.base
export AIRLOCK_LOG_LEVEL=${AIRLOCK_LOG_LEVEL:-ERROR}
# Fuzzing creates many intents: keep the rate limits (429 is documented and
# checked by the test suite) out of the way so every operation gets exercised.
export AIRLOCK_RATE_LIMITS=${AIRLOCK_RATE_LIMITS:-intents_per_minute=1000000,pending_per_subject=1000000}
export AIRLOCK_STORAGE_EVENTS_TOKEN="$($PY -c 'import secrets; print(secrets.token_urlsafe(32))')"
mkdir -p "$AIRLOCK_DATA_DIR"

port="$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
user="fuzz-$($PY -c 'import secrets; print(secrets.token_hex(4))')"
$PY manage.py migrate --noinput >/dev/null   # createuser refuses an unmigrated database
token="$($PY manage.py createuser "$user" --tenant fuzz | tail -n 1)"
[ -n "$token" ] || { echo "schemathesis.sh: createuser printed no token" >&2; exit 1; }

$PY manage.py serve --port "$port" --host 127.0.0.1 >"$work/server.log" 2>&1 &
server_pid=$!
base="http://127.0.0.1:$port"
for _ in $(seq 1 100); do
  curl -fsS "$base/healthz" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
  sleep 0.2
done
curl -fsS "$base/healthz" >/dev/null || { echo "schemathesis.sh: server did not start" >&2; cat "$work/server.log" >&2; exit 1; }

common=(--checks "$CHECKS" --max-examples "$MAX_EXAMPLES" --workers "$WORKERS" --no-color
        --suppress-health-check all --generation-database none --request-timeout 60)
[ -n "${SCHEMATHESIS_SEED:-}" ] && common+=(--seed "$SCHEMATHESIS_SEED")

rc=0
echo "== schemathesis: API operations (token auth) =="
$ST run "$base/api/v1/schema" "${common[@]}" -H "Authorization: Token $token" \
  --exclude-path /api/v1/storage-events "$@" || rc=$?
echo "== schemathesis: storage events (bearer token) =="
# schemathesis sends -H headers when it loads the schema too: load it from a file,
# fetched without credentials (the events token goes only to the events endpoint).
curl -fsS "$base/api/v1/schema?format=json" -o "$work/schema.json"
$ST run "$work/schema.json" --url "$base" "${common[@]}" -H "Authorization: Bearer $AIRLOCK_STORAGE_EVENTS_TOKEN" \
  --include-path /api/v1/storage-events --phases examples,coverage,fuzzing "$@" || rc=$?

if grep -q '"level": "error"' "$work/server.log"; then
  echo "schemathesis.sh: the server logged errors:" >&2
  grep '"level": "error"' "$work/server.log" | head -n 20 >&2
  rc=1
fi
exit "$rc"
