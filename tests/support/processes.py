"""Processes the tests start for real: a loopback port, a private clamd or Redis, `manage.py serve`.

One copy of each, so that a change in how clamd or serve is started is made once
(bench/common.py takes free_port and wait_healthy from here too).
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

from tests.support.env import EnvExtra, update_env, with_group_keys

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A loopback port nobody listens on right now (the OS picks it; a race is possible but rare)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(base: str, proc: subprocess.Popen | None = None, timeout: float = 60.0) -> bool:
    """Poll base/healthz until it answers 200 (True), `proc` exits or the time is up (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{base}/healthz", timeout=1).status_code == 200:
                return True
        except requests.RequestException:
            pass
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def api_upload(
    base: str, token: str, data: bytes, *, profile: str, filename: str, content_type: str, timeout: float = 30.0
) -> str:
    """Intent, then the upload its plan asks for (a PUT, or a presigned POST form); the attachment id."""
    intent = requests.post(
        f"{base}/api/v1/uploads",
        headers={"Authorization": f"Token {token}"},
        timeout=timeout,
        json={"profile": profile, "filename": filename, "size": len(data), "content_type": content_type},
    )
    assert intent.status_code == 201, intent.text
    upload = intent.json()["upload"]
    if upload["method"] == "PUT":
        sent = requests.put(upload["url"], data=data, headers=upload["headers"], timeout=timeout)
    else:
        sent = requests.post(
            upload["url"], data=upload["fields"], files={"file": (filename, data, content_type)}, timeout=timeout
        )
    assert sent.status_code in (200, 201, 202, 204), sent.text
    return intent.json()["id"]


def wait_settled(base: str, token: str, attachment_id: str, *, timeout: float = 60.0, poll: int = 10) -> dict:
    """Long-poll the attachment (`?wait=poll`) until it is ready, rejected or failed; its body.
    TimeoutError if it is still on its way after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = requests.get(
            f"{base}/api/v1/attachments/{attachment_id}?wait={poll}",
            headers={"Authorization": f"Token {token}"},
            timeout=poll + 10,
        ).json()
        if body["status"] in ("ready", "rejected", "failed"):
            return body
    raise TimeoutError(f"{attachment_id} still {body['status']} after {timeout}s")


def tus_create(
    base: str,
    token: str,
    size: int,
    *,
    profile: str = "image",
    filename: str = "t.jpg",
    content_type: str = "image/jpeg",
    timeout: float = 10.0,
) -> requests.Response:
    """POST /api/v1/tus/ as a tus client does (the metadata base64-encoded); the answer, a 201."""
    meta = {"profile": profile, "filename": filename, "content_type": content_type}
    response = requests.post(
        f"{base}/api/v1/tus/",
        timeout=timeout,
        headers={
            "Authorization": f"Token {token}",
            "Tus-Resumable": "1.0.0",
            "Upload-Length": str(size),
            "Upload-Metadata": ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in meta.items()),
        },
    )
    assert response.status_code == 201, response.text
    return response


class PrivateClamd:
    """A clamd of our own (scripts/clamd.sh with its own dir and port): stopping it touches nobody else."""

    def __init__(self, *, stream_max: str = "30M") -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="alk-clamd-", dir="/tmp"))  # short: sun_path is 108 bytes
        self.port = free_port()
        self.socket = str(self.dir / "clamd.sock")
        self.stream_max = stream_max

    def _run(self, action: str) -> subprocess.CompletedProcess:
        env = {
            **os.environ,
            "AIRLOCK_CLAMD_DIR": str(self.dir),
            "AIRLOCK_CLAMD_PORT": str(self.port),
            "AIRLOCK_CLAMD_STREAM_MAX": self.stream_max,
            "AIRLOCK_PYTHON": sys.executable,
        }
        return subprocess.run(
            [str(REPO / "scripts" / "clamd.sh"), action], env=env, capture_output=True, text=True, timeout=120
        )

    def start(self) -> None:
        result = self._run("start")
        assert result.returncode == 0, f"private clamd did not start: {result.stderr[-2000:]}"

    def stop(self) -> None:
        result = self._run("stop")
        assert result.returncode == 0, result.stderr[-2000:]

    def answering(self) -> bool:
        return self._run("status").returncode == 0

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class PrivateRedis:
    """A redis-server of our own on a free port, no persistence: a kill and a start lose every key, as a crash does."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("private redis-server did not start")

    def kill(self) -> None:
        """SIGKILL: every queued message, slot and beat is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class Server:
    """`manage.py serve` in a subprocess on a free port, on a database of its own under PostgreSQL."""

    def __init__(
        self,
        tmp: Path,
        extra_env: EnvExtra,
        args: tuple[str, ...] = (),
        db_port: int | None = None,
    ):
        """extra_env on top of os.environ: {"AIRLOCK_SERVE": {"web_processes": 1}} sets keys of a grouped variable."""
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "AIRLOCK_DATA_DIR": str(tmp),
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "AIRLOCK_KEY_PREFIX": f"e2e-{uuid.uuid4().hex[:8]}",
        }
        with_group_keys(self.env, "AIRLOCK_SERVE", tick_seconds=1)
        update_env(self.env, extra_env)
        if os.environ.get("DATABASE_URL", "").startswith("postgres"):
            # A database of its own, created and dropped around the server.
            self.dbname = f"airlock_e2e_{uuid.uuid4().hex[:8]}"
            base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
            subprocess.run(["psql", f"{base}/postgres", "-qc", f"CREATE DATABASE {self.dbname}"], check=True)
            self.env["DATABASE_URL"] = self.admin_url = f"{base}/{self.dbname}"
            if db_port is not None:  # through a proxy a fault test can cut
                self.env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:{db_port}/{self.dbname}"
        else:
            self.dbname = None
            self.env.pop("DATABASE_URL", None)
        self.args = args
        self.log_path = tmp / "serve.log"
        self.log = open(self.log_path, "w")
        self._launch()

    def _launch(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(self.port), *self.args],
            cwd=REPO,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        if not wait_healthy(self.base, self.proc):
            raise AssertionError(f"serve did not start: {self.log_path.read_text()[-2000:]}")

    def restart(self) -> None:
        """Stop `serve` (SIGTERM) and start it again on the same data, database and port."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=40)
        self._launch()

    def createuser(self, name: str, tenant: str) -> str:
        out = subprocess.run(
            [sys.executable, "manage.py", "createuser", name, "--tenant", tenant],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return out.strip().splitlines()[-1]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        if self.dbname:
            base = self.admin_url.rsplit("/", 1)[0]
            subprocess.run(
                ["psql", f"{base}/postgres", "-qc", f"DROP DATABASE IF EXISTS {self.dbname} WITH (FORCE)"], check=False
            )


def raw(port: int, request: bytes, timeout: float = 15.0) -> tuple[int, bytes]:
    """Send bytes as they are; (status, body) of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                length = [
                    line.split(b":", 1)[1].strip()
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ]
                if length and len(body) >= int(length[0]):
                    break
    assert data.startswith(b"HTTP/1."), data[:200]
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body
