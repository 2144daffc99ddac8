#!/usr/bin/env bash
# Make sure the services the test suite uses are running: PostgreSQL, Redis, clamd.
# PostgreSQL and Redis must be installed (or run elsewhere on these ports):
# they are started if installed but stopped. clamd is a private instance
# (scripts/clamd.sh) installed by scripts/install-system-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

# A TCP connect when the client tools are not installed (the server may run in a container).
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pg_up() { if command -v pg_isready >/dev/null 2>&1; then pg_isready -h 127.0.0.1 -p 5432 -q; else listening 5432; fi; }
redis_up() { if command -v redis-cli >/dev/null 2>&1; then redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; else listening 6379; fi; }

if ! pg_up; then
  command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ] || {
    echo "services.sh: PostgreSQL is not answering on 127.0.0.1:5432 and is not installed here (apt-get install postgresql)" >&2
    exit 1
  }
  echo "services.sh: starting PostgreSQL" >&2
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
  for _ in $(seq 1 30); do pg_up && break; sleep 1; done
fi

if ! redis_up; then
  command -v redis-server >/dev/null 2>&1 || {
    echo "services.sh: Redis is not answering on 127.0.0.1:6379 and is not installed here (apt-get install redis-server)" >&2
    exit 1
  }
  echo "services.sh: starting Redis" >&2
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 1 30); do redis_up && break; sleep 0.5; done
fi

scripts/clamd.sh start
