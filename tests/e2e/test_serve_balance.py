"""`serve` with several web processes: kept-alive connections are spread evenly over them.

A kept-alive connection stays with the process that accepted it; left to the
accept race, one process can hold most of them and queue them on its one GIL
while another idles (ops/httpserver.py:ConnectionShares).
"""

from __future__ import annotations

import os
import socket
import time
from collections import Counter
from pathlib import Path

import pytest

from .test_serve import Server
from .test_serve_edges import _read_response

# Several web processes need the shared-services shape (PostgreSQL + Redis).
pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

PROCESSES = 2
CLIENTS = 8


def _web_processes(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return [int(pid) for pid in children
            if b"--jobs-only" not in Path(f"/proc/{pid}/cmdline").read_bytes()]


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _server_side_inodes(server_port: int, client_ports: set[int]) -> dict[str, int]:
    """inode -> client port of each server-side socket connected to one of our clients (/proc/net/tcp)."""
    found = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].split(":")[1], 16)
        remote_port = int(fields[2].split(":")[1], 16)
        if local_port == server_port and remote_port in client_ports:
            found[fields[9]] = remote_port
    return found


def test_kept_alive_connections_are_spread_evenly_over_the_web_processes(tmp_path):
    server = Server(tmp_path, {"AIRLOCK_WEB_PROCESSES": str(PROCESSES)})
    try:
        deadline = time.monotonic() + 20
        while len(web := _web_processes(server.proc.pid)) < PROCESSES and time.monotonic() < deadline:
            time.sleep(0.1)  # the first process answers /healthz before the last one is forked
        assert len(web) == PROCESSES, web
        for _ in range(2):  # two rounds: an even split by chance is unlikely twice (27 % each for 8 over 2)
            clients = []
            try:
                for _ in range(CLIENTS):  # one after another, each answered and kept open
                    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
                    clients.append(sock)
                    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    assert _read_response(sock)[0] == 200
                    time.sleep(0.05)
                ports = {sock.getsockname()[1] for sock in clients}
                held = _server_side_inodes(server.port, ports)
                assert len(held) == CLIENTS, held
                per_process = Counter({pid: len(_socket_inodes(pid) & held.keys()) for pid in web})
                assert sorted(per_process.values()) == [CLIENTS // PROCESSES] * PROCESSES, per_process
            finally:
                for sock in clients:
                    sock.close()
            time.sleep(0.5)  # the processes notice the closed connections
    finally:
        server.stop()
