"""A real Dramatiq worker in its own process, for tests that SIGKILL it mid-step.

    python -m tests.faults.worker        (started by tests/faults/support.py:WorkerProcess)

It sets Django up against the parent test process's database and broker
namespace (tests/faults/worker_settings.py), starts a dramatiq.Worker on the
pipeline's queues, prints "ready" and runs until SIGTERM, or until
AIRLOCK_FAULT_MAX_SECONDS pass, so a forgotten worker never outlives its test.

Test-only hook, read from the environment (nothing in the product reads it):
  AIRLOCK_FAULT_STALL=derive  the sandbox job of the derive step becomes the
                              sandbox's `_test_sleep` kind: a real job process
                              that blocks until killed. Before it starts, the
                              worker writes AIRLOCK_FAULT_MARKER, so the test
                              knows the step is in flight.
A stall mid-scan needs no hook: the test points CLAMD_SOCKET at a clamd that
reads the stream and never answers.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path


def _install_stall_hook() -> None:
    if os.environ.get("AIRLOCK_FAULT_STALL") != "derive":
        return
    import processing.sandbox_config as sandbox_config
    from processing.sandbox import run_job
    from tests.sandbox import jobkinds

    jobkinds.install()

    marker = Path(os.environ["AIRLOCK_FAULT_MARKER"])

    def stalled(kind: str, input_path: Path, work_dir: Path):
        marker.write_text(f"{kind} {os.getpid()}\n")
        return run_job("_test_sleep", input_path, work_dir, limits=sandbox_config.limits_from_settings())

    sandbox_config.run_sandboxed = stalled


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.faults.worker_settings")
    import django

    django.setup()
    _install_stall_hook()
    from ops.runtime import start_worker

    worker = start_worker(threads=int(os.environ.get("AIRLOCK_FAULT_THREADS", "1")))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("ready", flush=True)
    stop.wait(float(os.environ.get("AIRLOCK_FAULT_MAX_SECONDS", "300")))
    worker.stop(timeout=5000)
    from processing.sandbox import shutdown

    shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
