#!/usr/bin/env bash
# Start Airlock (`manage.py serve`, embedded default: SQLite, data under examples/wedding/var/airlock)
# and the wedding host beside it, wired together: the webhook secret and the host's API token are
# made on the first run and kept in examples/wedding/var/. Ctrl-C stops both.
# Ports: AIRLOCK_PORT (8000), WEDDING_PORT (8002). For a phone on the same network:
# AIRLOCK_HOST=0.0.0.0 AIRLOCK_PUBLIC_URL=http://<this computer's address>:8000 (the link and its QR code
# carry that address).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${AIRLOCK_PYTHON:-$repo/.venv/bin/python}"
airlock_port="${AIRLOCK_PORT:-8000}"
wedding_port="${WEDDING_PORT:-8002}"
var="$here/var"
mkdir -p "$var/airlock"
umask 077

# The host talks to Airlock through the Python client: installed into the environment if it is missing
# (scripts/bootstrap.sh installs it only with the test extras).
if ! "$python" -c 'import airlock_client, httpx' 2> /dev/null; then
  "$python" -m pip install --quiet -c "$repo/constraints.txt" -e "$repo/clients/python"
fi

# One Airlock of its own, on the embedded default, whatever the shell points at.
unset DATABASE_URL REDIS_URL RABBITMQ_URL CLAMD_SOCKET CLAMD_HOST DJANGO_SETTINGS_MODULE

[ -s "$var/webhook-secret" ] || "$python" -c 'import base64, os; print("whsec_" + base64.b64encode(os.urandom(32)).decode())' > "$var/webhook-secret"
secret="$(cat "$var/webhook-secret")"
wedding="http://127.0.0.1:$wedding_port"
airlock="http://127.0.0.1:$airlock_port"

# Airlock sends webhooks to the host (a loopback http URL: ALLOW_PRIVATE, a development setting).
# Guests' phones open Airlock's own link page: nothing of the host's in between, no CORS needed.
export AIRLOCK_DATA_DIR="$var/airlock"
export AIRLOCK_WEBHOOK_URL="$wedding/airlock/webhook" AIRLOCK_WEBHOOK_SECRET="$secret" AIRLOCK_WEBHOOK_ALLOW_PRIVATE=1

cd "$repo"
"$python" manage.py serve --host "${AIRLOCK_HOST:-127.0.0.1}" --port "$airlock_port" > "$var/airlock.log" 2>&1 &
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
  "$python" manage.py createuser wedding --tenant wedding | tail -n 1 > "$var/token"
fi

WEDDING_AIRLOCK_TOKEN="$(cat "$var/token")" WEDDING_WEBHOOK_SECRET="$secret" \
  "$python" "$here/manage.py" runwedding --airlock "$airlock" --port "$wedding_port" \
  ${AIRLOCK_PUBLIC_URL:+--media-origin "$AIRLOCK_PUBLIC_URL"}
