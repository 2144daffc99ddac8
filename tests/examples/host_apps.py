"""An example host app (examples/<project>) run beside a test's Airlock `serve`, as its run.sh does."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.processes import REPO, Server, wait_healthy


@contextmanager
def host_app(
    *,
    project: str,
    command: str,
    server: Server,
    port: int,
    data_dir: Path,
    env: dict[str, str],
    origin_flag: str,
    origins: Iterable[str] = (),
) -> Iterator[Path]:
    """`examples/<project>/manage.py <command>` against `server` on `port`, its own SQLite; yields its log's path."""
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
