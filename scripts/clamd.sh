#!/usr/bin/env bash
# Run a private clamd for Airlock's tests, CI and local development.
#
#   scripts/clamd.sh install   apt-get install clamav-daemon (+ clamav-testfiles) if missing
#   scripts/clamd.sh start     render the config, start clamd, wait for PONG (idempotent)
#   scripts/clamd.sh stop      stop the clamd started from this runtime dir
#   scripts/clamd.sh status    PING the socket and the TCP port; exit 0 only if both answer
#
# Environment overrides:
#   AIRLOCK_CLAMD_DIR         runtime dir (config, db copy, socket, pid, log)  [/tmp/airlock-clamd]
#   AIRLOCK_CLAMD_PORT        loopback TCP port                                 [3310]
#   AIRLOCK_CLAMD_STREAM_MAX  StreamMaxLength (tests start a second clamd with 1M) [1100M]
#   AIRLOCK_CLAMD_TIMEOUT     seconds to wait for PONG after starting          [30]
#   AIRLOCK_PYTHON            python used for the PING probe (stdlib only)     [python3]
#
# The signature database is the tiny test database shipped in scripts/clamd/
# (EICAR + ClamAV's test file): there is no internet here for freshclam. For a
# real deployment point a production clamd at the official database instead.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SHIPPED="$HERE/clamd"
DIR="${AIRLOCK_CLAMD_DIR:-/tmp/airlock-clamd}"
PORT="${AIRLOCK_CLAMD_PORT:-3310}"
STREAM_MAX="${AIRLOCK_CLAMD_STREAM_MAX:-1100M}"
WAIT="${AIRLOCK_CLAMD_TIMEOUT:-30}"
PYTHON="${AIRLOCK_PYTHON:-python3}"
SOCK="$DIR/clamd.sock"
CONF="$DIR/clamd.conf"
PIDFILE="$DIR/clamd.pid"

log() { echo "clamd.sh: $*" >&2; }

# zPING one endpoint ("unix:/path" or "tcp:host:port"); prints nothing, exit 0 on PONG.
# Python's stdlib is used because bash cannot talk to a unix socket and socat
# is not guaranteed to be installed; any python3 will do.
ping_one() {
    "$PYTHON" - "$1" <<'PY' 2>/dev/null
import socket, sys
kind, _, addr = sys.argv[1].partition(":")
if kind == "unix":
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(2); s.connect(addr)
else:
    host, _, port = addr.rpartition(":"); s = socket.create_connection((host, int(port)), timeout=2)
s.sendall(b"zPING\0")
reply = b""
while not reply.endswith(b"\0"):
    part = s.recv(64)
    if not part:
        break
    reply += part
sys.exit(0 if reply == b"PONG\0" else 1)
PY
}

answering() { ping_one "unix:$SOCK" && ping_one "tcp:127.0.0.1:$PORT"; }

# The pid in our pidfile, only if that process really is clamd with our config
# (a stale pidfile must never make us signal an unrelated process).
our_pid() {
    [[ -f "$PIDFILE" ]] || return 1
    local pid
    pid="$(tr -dc '0-9' <"$PIDFILE")"
    [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "clamd.*$CONF" || return 1
    echo "$pid"
}

cmd_install() {
    # The 44 ClamAV test files prove the shipped signature + clamd unpacking in tests.
    "$HERE/install-system-deps.sh" clamav-daemon clamav-testfiles
}

cmd_start() {
    if answering; then
        log "already answering PING on $SOCK and 127.0.0.1:$PORT"
        return 0
    fi
    local clamd_bin
    clamd_bin="$(command -v clamd || echo /usr/sbin/clamd)"
    [[ -x "$clamd_bin" ]] || { log "clamd not installed: run '$0 install'"; return 1; }

    mkdir -p "$DIR/db" "$DIR/tmp"
    # Fresh copy of the shipped database every start, so an edit is picked up.
    rm -f "$DIR"/db/*
    cp "$SHIPPED"/*.hdb "$DIR/db/"

    # CI runs as root and clamd must then be told to stay root (it would
    # otherwise need a 'clamav' user owning the runtime dir). As a normal
    # user clamd simply keeps the invoking user, so no User line.
    local user_line="# User: not set (clamd keeps the invoking user)"
    [[ "$(id -u)" == 0 ]] && user_line="User root"

    sed -e "s|@DIR@|$DIR|g" -e "s|@PORT@|$PORT|g" -e "s|@STREAM_MAX@|$STREAM_MAX|g" \
        -e "s|@USER_LINE@|$user_line|g" "$SHIPPED/clamd.conf.template" >"$CONF"

    # A clamd of ours that runs but does not answer (wedged) is replaced.
    if pid="$(our_pid)"; then
        log "clamd pid $pid is not answering; stopping it"
        cmd_stop
    fi

    if ! "$clamd_bin" --config-file="$CONF"; then
        log "clamd failed to start"
        tail -n 20 "$DIR/clamd.log" >&2 || true
        return 1
    fi

    local deadline=$((SECONDS + WAIT))
    until answering; do
        if ((SECONDS >= deadline)); then
            log "clamd did not answer PING within ${WAIT}s"
            tail -n 20 "$DIR/clamd.log" >&2 || true
            return 1
        fi
        sleep 0.1
    done
    log "clamd ready: socket $SOCK, tcp 127.0.0.1:$PORT, StreamMaxLength $STREAM_MAX"
}

cmd_stop() {
    local pid
    if ! pid="$(our_pid)"; then
        log "no clamd running from $DIR"
        return 0
    fi
    kill -TERM "$pid"
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || { log "stopped clamd pid $pid"; rm -f "$SOCK"; return 0; }
        sleep 0.1
    done
    log "clamd pid $pid ignored SIGTERM for 10s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$SOCK"
}

cmd_status() {
    local rc=0
    local endpoint
    for endpoint in "unix:$SOCK" "tcp:127.0.0.1:$PORT"; do
        if ping_one "$endpoint"; then echo "$endpoint: PONG"; else echo "$endpoint: down"; rc=1; fi
    done
    if pid="$(our_pid)"; then echo "pid $pid"; fi
    return "$rc"
}

case "${1:-}" in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    *) echo "usage: $0 install|start|stop|status" >&2; exit 2 ;;
esac
