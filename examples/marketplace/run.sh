#!/usr/bin/env bash
# Start Airlock (`manage.py serve`, embedded default: SQLite, data under examples/marketplace/var/airlock)
# and the marketplace beside it, wired together: the webhook secret, the CORS origin and the
# marketplace's API token are made on the first run and kept in examples/marketplace/var/.
# Ctrl-C stops both. Ports: AIRLOCK_PORT (8000), MARKETPLACE_PORT (8001).
#
# Airlock runs from the repository's .venv (scripts/bootstrap.sh makes it when it is missing); the
# marketplace, a host application, from an environment of its own (MARKETPLACE_VENV, default
# examples/marketplace/.venv: Django and Airlock's Python client), made on the first run.
#   run.sh --setup   make both environments and stop (what the first run does before it starts)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${AIRLOCK_PYTHON:-$repo/.venv/bin/python}"
venv="${MARKETPLACE_VENV:-$here/.venv}"
airlock_port="${AIRLOCK_PORT:-8000}"
market_port="${MARKETPLACE_PORT:-8001}"
var="${MARKETPLACE_VAR:-$here/var}"

if [ ! -x "$python" ]; then
  [ -z "${AIRLOCK_PYTHON:-}" ] || { echo "AIRLOCK_PYTHON=$python is not an executable" >&2; exit 1; }
  "$repo/scripts/bootstrap.sh"
fi
# Reinstalled only when what it installs changed since the last time.
stamp="$venv/.marketplace-installed"
if [ ! -f "$stamp" ] || [ "$here/requirements.txt" -nt "$stamp" ] \
   || [ "$repo/clients/python/pyproject.toml" -nt "$stamp" ] || [ "$repo/constraints.txt" -nt "$stamp" ]; then
  echo "marketplace: installing its environment (Django, Airlock's Python client) into $venv" >&2
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet -c "$repo/constraints.txt" -r "$here/requirements.txt" \
    -e "$repo/clients/python"
  touch "$stamp"
fi
[ "${1:-}" = "--setup" ] && exit 0

mkdir -p "$var/airlock"
umask 077

# One Airlock of its own, on the embedded default, whatever the shell points at.
unset DATABASE_URL REDIS_URL RABBITMQ_URL CLAMD_SOCKET CLAMD_HOST DJANGO_SETTINGS_MODULE

[ -s "$var/webhook-secret" ] || "$python" -c 'import base64, os; print("whsec_" + base64.b64encode(os.urandom(32)).decode())' > "$var/webhook-secret"
secret="$(cat "$var/webhook-secret")"
market="http://127.0.0.1:$market_port"
airlock="http://127.0.0.1:$airlock_port"

# Airlock sends webhooks to the marketplace (a loopback http URL: ALLOW_PRIVATE, a development
# setting) and lets the marketplace's pages send photos to it (CORS).
export AIRLOCK_DATA_DIR="$var/airlock"
export AIRLOCK_WEBHOOK_URL="$market/airlock/webhook" AIRLOCK_WEBHOOK_SECRET="$secret" AIRLOCK_WEBHOOK_ALLOW_PRIVATE=1
export AIRLOCK_CORS_ALLOWED_ORIGINS="$market"

cd "$repo"
"$python" manage.py serve --port "$airlock_port" > "$var/airlock.log" 2>&1 &
serve=$!
trap 'kill "$serve" 2>/dev/null; wait "$serve" 2>/dev/null' EXIT INT TERM
for _ in $(seq 1 120); do
  curl -fsS "$airlock/healthz" > /dev/null 2>&1 && break
  kill -0 "$serve" 2>/dev/null || { echo "serve stopped: see $var/airlock.log" >&2; exit 1; }
  sleep 0.5
done
curl -fsS "$airlock/healthz" > /dev/null || { echo "serve did not answer: see $var/airlock.log" >&2; exit 1; }
echo "airlock: $airlock  (log: $var/airlock.log)"

if [ ! -s "$var/token" ]; then
  "$python" manage.py createuser marketplace --tenant marketplace | tail -n 1 > "$var/token"
fi

MARKETPLACE_AIRLOCK_TOKEN="$(cat "$var/token")" MARKETPLACE_WEBHOOK_SECRET="$secret" \
  "$venv/bin/python" "$here/manage.py" runmarketplace --airlock "$airlock" --port "$market_port"
