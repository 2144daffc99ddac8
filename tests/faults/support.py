"""Helpers for the fault-injection tests: a killable worker process, misbehaving services, invariants."""

from __future__ import annotations

import os
import select
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings
from django.db import connection

from tests.support.env import EnvExtra, update_env
from tests.support.processes import free_port

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 90.0


# --- a worker in its own process -------------------------------------------------


def broker_namespace() -> str | None:
    return (settings.DRAMATIQ_BROKER.get("OPTIONS") or {}).get("namespace")


def descendants(pid: int) -> set[int]:
    """Every live process below pid (by walking /proc parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().decode(errors="replace").rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pids: Iterable[int], timeout: float = 15.0) -> set[int]:
    """Wait until none of pids is alive; return the ones still alive at the deadline."""
    deadline = time.monotonic() + timeout
    left = {p for p in pids if alive(p)}
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = {p for p in left if alive(p)}
    return left


class WorkerProcess:
    """`python -m tests.faults.worker` against this test's database and broker namespace."""

    def __init__(self, tmp: Path, *, env: EnvExtra | None = None, threads: int = 1) -> None:
        self.tmp = tmp
        self.log_path = tmp / f"worker-{uuid.uuid4().hex[:6]}.log"
        base = {k: v for k, v in os.environ.items()}
        base.update(
            {
                "DJANGO_SETTINGS_MODULE": "tests.faults.worker_settings",
                "AIRLOCK_FAULT_DB_NAME": str(connection.settings_dict["NAME"]),
                "AIRLOCK_FAULT_THREADS": str(threads),
                "AIRLOCK_FAULT_MAX_SECONDS": "240",
                "AIRLOCK_STORAGE": "local",
                "AIRLOCK_STORAGE_ROOT": str(settings.AIRLOCK_STORAGE_ROOT),
                "AIRLOCK_LOG_LEVEL": "WARNING",
                "AIRLOCK_FAULT_KEY_PREFIX": settings.AIRLOCK_KEY_PREFIX,
                "PYTHONUNBUFFERED": "1",
            }
        )
        namespace = broker_namespace()
        if namespace:
            base["AIRLOCK_FAULT_NAMESPACE"] = namespace
        self.env = update_env(base, env or {})
        self.proc: subprocess.Popen | None = None

    def start(self) -> WorkerProcess:
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.worker"],
            cwd=REPO,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], READY_TIMEOUT)
        line = self.proc.stdout.readline() if ready else b""
        if line.strip() != b"ready":
            self.kill()
            raise AssertionError(f"worker did not start ({line!r}):\n{self.log()}")
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: no cleanup code of the worker runs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        self._close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close()

    def _close(self) -> None:
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()
        log = getattr(self, "_log", None)
        if log is not None and not log.closed:
            log.close()


def wait_until(predicate, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


# --- misbehaving services --------------------------------------------------------


class StallingClamd:
    """A clamd on a unix socket that reads the whole INSTREAM and then never answers.

    `received` is set once a complete stream arrived: the scanner is then blocked
    waiting for a verdict, i.e. the worker is in the middle of the scan step.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.received = threading.Event()
        self.release = threading.Event()
        fake = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                conn = self.request
                conn.settimeout(60)
                try:
                    command = b""
                    while not command.endswith(b"\0"):
                        part = conn.recv(1)
                        if not part:
                            return
                        command += part
                    if command == b"zPING\0":
                        conn.sendall(b"PONG\0")
                        return
                    if command == b"zVERSION\0":  # asked before each scan (the signatures it judges with)
                        conn.sendall(b"ClamAV 1.4.6/27480/Thu Dec  3 08:35:45 2026\0")
                        return
                    while True:
                        size = int.from_bytes(_read_exact(conn, 4), "big")
                        if size == 0:
                            break
                        _read_exact(conn, size)
                    fake.received.set()
                    fake.release.wait(120)  # bounded: the test releases it at teardown
                except (OSError, ConnectionError):
                    return

        self.server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def _read_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = conn.recv(n - len(data))
        if not part:
            raise ConnectionError("client closed")
        data += part
    return data


# --- invariants --------------------------------------------------------------------


def assert_not_served(attachment_id, *others) -> None:
    """Nobody but the uploader can read a file that is not ready: 404, no bytes."""
    from tests.support import client_for

    for user in others:
        client = client_for(user)
        for suffix in ("/download", "/thumbnail"):
            response = client.get(f"/api/v1/attachments/{attachment_id}{suffix}")
            assert response.status_code == 404, (user.username, suffix, response.status_code)
            assert not getattr(response, "streaming", False)


def assert_served_intact(attachment_id, user) -> None:
    """A ready file is served to its tenant, byte for byte what the row says."""
    import hashlib

    from attachments.models import Attachment
    from tests.support import client_for

    row = Attachment.objects.get(pk=attachment_id)
    response = client_for(user).get(f"/api/v1/attachments/{attachment_id}/download")
    assert response.status_code == 200, response.status_code
    body = b"".join(response.streaming_content)
    assert len(body) == row.size and hashlib.sha256(body).hexdigest() == row.sha256
    assert client_for(user).get(f"/api/v1/attachments/{attachment_id}/thumbnail").status_code == 200


def assert_ready_and_complete(attachment_id) -> None:
    """ready exactly once, with every derivative durable in storage."""
    from attachments.models import Attachment, TransitionLog
    from attachments.storage import get_gateway

    row = Attachment.objects.get(pk=attachment_id)
    assert row.status == "ready", (row.status, row.reason_code, row.reason_message)
    assert row.lease_token is None and row.step == ""
    assert TransitionLog.objects.filter(attachment=row, transition="finish").count() == 1
    gateway = get_gateway()
    kinds = sorted(row.derivatives.values_list("kind", flat=True))
    assert "thumbnail" in kinds, kinds
    for derivative in row.derivatives.all():
        info = gateway.head(derivative.storage_key)
        assert info is not None and info.size == derivative.size, derivative.storage_key
    assert gateway.head(row.served_key) is not None


class TcpProxy:
    """A TCP forwarder to a real service that a test can cut (connections dropped, new ones refused) and restore."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> TcpProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(256)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            if self._listener is not listener:  # cut meanwhile
                client.close()
                upstream.close()
                return
            with self._lock:
                self._conns.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        """Drop every connection and refuse new ones (nothing listens on the port any more)."""
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (close alone does not)
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        with self._lock:
            conns, self._conns = self._conns, set()
        for sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
