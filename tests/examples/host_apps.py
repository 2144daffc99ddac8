"""An example host app (examples/<project>) run beside a test's Airlock `serve`, as its run.sh does, and what
the examples' browser tests share: the two started together, the browser, the bucket's CORS, a forged webhook."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from airlock_client import Client
from tests.s3.support import moto_bucket_env
from tests.support.browser import launch_chromium
from tests.support.env import EnvExtra
from tests.support.processes import REPO, Server, free_port, wait_healthy


@dataclass
class HostStack:
    """A test's Airlock `serve` and the example host app wired to it (webhooks signed with the test's secret)."""

    server: Server
    token: str
    host: str
    data_dir: Path
    log_path: Path

    def airlock(self) -> Client:
        return Client(self.server.base, self.token)

    def wait_log(self, *lines: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not all(line in self.log_path.read_text() for line in lines) and time.monotonic() < deadline:
            time.sleep(0.3)
        missing = [line for line in lines if line not in self.log_path.read_text()]
        assert not missing, f"not in the host's log: {missing}"


@dataclass(frozen=True)
class Example:
    """How a browser test runs its example: each test module gives its own as the `example` fixture."""

    project: str  # examples/<project>; also its account, its data folder and its settings' prefix
    command: str
    stack_type: type[HostStack]
    secret: str
    origin_flag: str  # the host's flag that adds an origin its pages may load from (the S3 endpoint)
    bucket: str
    airlock_env: Callable[[str], EnvExtra] = lambda host: {}  # Airlock's settings, given the host's URL
    host_env: Mapping[str, str] = field(default_factory=dict)


@contextmanager
def host_app(
    example: Example, *, server: Server, port: int, data_dir: Path, env: dict[str, str], origins: Iterable[str] = ()
) -> Iterator[Path]:
    """`examples/<project>/manage.py <command>` against `server` on `port`, its own SQLite; yields its log's path."""
    project, command, origin_flag = example.project, example.command, example.origin_flag
    log_path = data_dir / f"{project}.log"
    full_env = {**os.environ, "DJANGO_SETTINGS_MODULE": f"{project}.settings", **env}
    full_env.pop("DATABASE_URL", None)  # the host keeps its own SQLite database
    flags = [arg for origin in origins for arg in (origin_flag, origin)]
    proc = None
    try:
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    f"examples/{project}/manage.py",
                    command,
                    "--airlock",
                    server.base,
                    "--port",
                    str(port),
                ]
                + flags,
                cwd=REPO,
                env=full_env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"
        assert wait_healthy(url, proc), f"the {project} host did not start: {log_path.read_text()[-2000:]}"
        yield log_path
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=20)


def sqlite_uuid(stored: str) -> str:
    """Django keeps a UUIDField in SQLite as 32 hex digits."""
    return f"{stored[:8]}-{stored[8:12]}-{stored[12:16]}-{stored[16:20]}-{stored[20:]}" if "-" not in stored else stored


def start_stack(
    tmp_path_factory: pytest.TempPathFactory,
    example: Example,
    airlock_env: EnvExtra,
    origins: Iterable[str] = (),
) -> Iterator[HostStack]:
    port = free_port()
    host = f"http://127.0.0.1:{port}"
    server = Server(
        tmp_path_factory.mktemp("airlock"),
        {
            "AIRLOCK_WEBHOOK_URL": f"{host}/airlock/webhook",
            "AIRLOCK_WEBHOOK_SECRET": example.secret,
            "AIRLOCK_WEBHOOK_ALLOW_PRIVATE": "1",
            **example.airlock_env(host),
            **airlock_env,
        },
    )
    project = example.project
    data_dir = tmp_path_factory.mktemp(project)
    try:
        token = server.createuser(project, project)
        prefix = project.upper()
        env = {
            f"{prefix}_DATA_DIR": str(data_dir),
            f"{prefix}_AIRLOCK_TOKEN": token,
            f"{prefix}_WEBHOOK_SECRET": example.secret,
            **example.host_env,
        }
        with host_app(example, server=server, port=port, data_dir=data_dir, env=env, origins=origins) as log_path:
            yield example.stack_type(server, token, host, data_dir, log_path)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory, example: Example) -> Iterator[HostStack]:
    """Airlock on local storage: the browser sends the bytes to Airlock itself."""
    yield from start_stack(tmp_path_factory, example, {})


@pytest.fixture(scope="module")
def s3_stack(tmp_path_factory, example: Example, moto_endpoint: str) -> Iterator[HostStack]:
    """Airlock on S3 (moto over HTTP): the browser sends the bytes to the bucket."""
    yield from start_stack(tmp_path_factory, example, moto_bucket_env(moto_endpoint, example.bucket), (moto_endpoint,))


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


def host_page(chromium: Browser, stack: HostStack, **options: Any) -> Page:
    """A fresh desktop browser context on the host's pages (`options` go to the context)."""
    context = chromium.new_context(base_url=stack.host, viewport={"width": 1280, "height": 900}, **options)
    context.set_default_timeout(60_000)
    return context.new_page()


def bucket_cors(stack: HostStack, origins: list[str]) -> None:
    """What `manage.py s3_setup --apply` gives the bucket for these origins."""
    boto3.client(
        "s3", endpoint_url=stack.server.env["AIRLOCK_S3_ENDPOINT_URL"], region_name="us-east-1"
    ).put_bucket_cors(
        Bucket=stack.server.env["AIRLOCK_S3_BUCKET"],
        CORSConfiguration={
            "CORSRules": [
                {
                    "AllowedOrigins": origins,
                    "AllowedMethods": ["GET", "HEAD", "POST", "PUT"],
                    "AllowedHeaders": ["*"],
                    "ExposeHeaders": ["ETag"],
                    "MaxAgeSeconds": 3600,
                }
            ]
        },
    )


def forged_webhook_statuses(stack: HostStack, event: dict[str, Any]) -> tuple[int, int]:
    """What the host's webhook endpoint answers to `event` with a forged signature, and with none."""
    body = json.dumps(event).encode()
    headers = {
        "webhook-id": "msg_forged",
        "webhook-timestamp": str(int(time.time())),
        "webhook-signature": "v1," + base64.b64encode(b"\0" * 32).decode(),
        "content-type": "application/json",
    }
    forged = httpx.post(f"{stack.host}/airlock/webhook", content=body, headers=headers)
    unsigned = httpx.post(f"{stack.host}/airlock/webhook", content=body, headers={"content-type": "application/json"})
    return forged.status_code, unsigned.status_code
