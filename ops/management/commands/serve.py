"""Run Airlock: gunicorn web processes, the Dramatiq worker and the scheduler ticks, under one command.

Two shapes, chosen from the configuration:
  - the in-process broker (the embedded default) with the worker or the
    scheduler: one web process that also runs them. The broker's messages only
    exist in that process, so the worker has to live there.
  - otherwise (a shared broker, or web only: --no-worker --no-scheduler):
    AIRLOCK_SERVE.web_processes web processes, on SQLite as on PostgreSQL (one
    process's requests queue on its GIL; processes share neither), and the
    worker + scheduler, if wanted, in one more process of their own, which serve
    starts, restarts if it dies and stops with itself. Web-only processes on the
    in-process broker leave their jobs in the outbox for the `serve` that runs
    the worker (attachments/services/handoff.py), as a management command does.
SIGTERM stops gracefully: no new connections, in-flight requests finish,
in-flight jobs' leases go back to pending.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time

from django.core.management.base import BaseCommand

from ops.health import warm_readiness

log = logging.getLogger("airlock.serve")


class Command(BaseCommand):
    help = "Run Airlock: web server, Dramatiq worker and scheduler ticks."

    def add_arguments(self, parser):
        import argparse

        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-worker", action="store_true", help="web only (workers run elsewhere)")
        parser.add_argument("--no-scheduler", action="store_true", help="no ticks (cron or a scheduler runs them)")
        parser.add_argument("--threads", type=int, default=None, help="worker (job) threads")
        # The supervised job process of the shared-services shape (serve starts it itself).
        parser.add_argument("--jobs-only", action="store_true", help=argparse.SUPPRESS)

    def handle(self, *args, **opts):
        if opts["jobs_only"]:
            return run_jobs_process(
                worker=not opts["no_worker"], scheduler=not opts["no_scheduler"], threads=opts["threads"]
            )
        return self._serve(opts)

    def _serve(self, opts) -> None:
        from django.core.wsgi import get_wsgi_application

        from attachments.bootstrap import migrate_on_first_run
        from attachments.services.staff import moderator_group_ensure
        from ops import httpserver

        migrate_on_first_run()  # embedded default / brand-new database only; said in the log
        moderator_group_ensure()
        _ensure_bucket()
        from django.conf import settings

        settings.STATIC_ROOT.mkdir(mode=0o700, parents=True, exist_ok=True)  # WhiteNoise looks there too
        app = get_wsgi_application()
        _close_connections()  # nothing database-related may cross the fork into web processes

        want_jobs = not (opts["no_worker"] and opts["no_scheduler"])
        single = single_process(jobs_here=want_jobs)
        if not want_jobs and broker_is_in_process():
            from attachments.services import outbox

            outbox.relay_elsewhere()  # this process's broker has no consumer: the worker's serve relays them
        host, port = opts["host"], opts["port"]
        bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

        def ready() -> None:
            if want_jobs and not single:
                supervisor.start()
            self.stdout.write(f"Airlock listening on http://{host}:{port}/", ending="\n")
            self.stdout.flush()

        runtime_box: list = []

        def start_jobs(worker) -> None:
            from attachments import waiting
            from ops.runtime import JobRuntime

            runtime = JobRuntime(
                worker=not opts["no_worker"], scheduler=not opts["no_scheduler"], threads=opts["threads"]
            )
            runtime.start()
            runtime_box.append(runtime)
            # Every status change happens in this process: waiters need no listener.
            waiting.hub.local_changes_only = not opts["no_worker"]

        def stop_jobs(worker) -> None:
            for runtime in runtime_box:
                runtime.stop()

        def web_process_init(worker) -> None:
            # A new process's first checks build its clients (S3's takes most of a second): done
            # now, not by the first probes, which would all wait for it.
            warm_readiness()
            if want_jobs and single:
                start_jobs(worker)

        supervisor = JobsSupervisor(opts)
        server = httpserver.AirlockServer(
            app,
            httpserver.options(
                bind=bind,
                processes=1 if single else settings.AIRLOCK_SERVE.web_processes,
                on_ready=ready,
                post_worker_init=web_process_init,
                worker_exit=stop_jobs if (want_jobs and single) else None,
                on_exit=supervisor.stop,
            ),
        )
        server.run()


def single_process(*, jobs_here: bool) -> bool:
    """One web process only when the jobs run in it: the in-process broker's messages exist nowhere else.

    Not for SQLite as such: several processes read it side by side (WAL) where
    one process's threads queue on its GIL.
    """
    return jobs_here and broker_is_in_process()


def broker_is_in_process() -> bool:
    from ops.runtime import broker_is_in_process as in_process

    return in_process()


def _close_connections() -> None:
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        conn.close()
        close_pool = getattr(conn, "close_pool", None)
        if close_pool is not None and getattr(conn, "pool", None) is not None:
            close_pool()


def _ensure_bucket() -> None:
    from attachments.storage import get_gateway

    gateway = get_gateway()
    ensure = getattr(gateway, "ensure_bucket", None)
    if ensure is None:
        return
    try:
        if ensure():
            log.warning("created the missing S3 bucket", extra={"bucket": getattr(gateway, "bucket", "")})
    except Exception as exc:  # readyz reports storage trouble; serving starts anyway
        log.warning("could not check the S3 bucket", extra={"error": str(exc)[:300]})


class JobsSupervisor:
    """Keeps one `serve --jobs-only` child running beside the web processes (restarted if it dies)."""

    def __init__(self, opts: dict) -> None:
        self.argv = [sys.executable, sys.argv[0], "serve", "--jobs-only"]
        for flag in ("no_worker", "no_scheduler"):
            if opts[flag]:
                self.argv.append("--" + flag.replace("_", "-"))
        if opts["threads"]:
            self.argv += ["--threads", str(opts["threads"])]
        self.proc: subprocess.Popen | None = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="airlock-jobs-supervisor", daemon=True)

    def start(self) -> None:
        if not self.thread.is_alive():
            self.thread.start()

    def _run(self) -> None:
        delay = 1.0
        while not self.stopping.is_set():
            started = time.monotonic()
            self.proc = spawn(self.argv)
            while self.proc.poll() is None and not self.stopping.is_set():
                self.stopping.wait(0.5)
            if self.stopping.is_set():
                return
            log.warning("the job process exited; starting a new one", extra={"code": self.proc.returncode})
            delay = 1.0 if time.monotonic() - started > 60 else min(delay * 2, 30.0)
            self.stopping.wait(delay)

    def stop(self) -> None:
        from django.conf import settings

        self.stopping.set()
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=settings.AIRLOCK_HTTP_LIMITS.graceful_timeout_seconds + 10)
        except subprocess.TimeoutExpired:
            proc.kill()


def spawn(argv: list[str]) -> subprocess.Popen:
    """Start `argv` without a window in which a forked web process could inherit the start-up pipe.

    Popen's default fork + exec waits on a pipe until the child has exec'd; a web
    process forked by the main thread meanwhile inherits that pipe's write end and
    keeps it open for its whole life, so Popen never returns and the job process
    it started is never watched (a killed one was never replaced). posix_spawn
    (taken when close_fds is off) has no such pipe: it returns once the child has
    exec'd. The child inherits only inheritable descriptors: the listening
    socket (gunicorn keeps it so for a re-exec), on which it never accepts, and
    which it lets go when it stops with serve.
    """
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, close_fds=False)


def run_jobs_process(*, worker: bool, scheduler: bool, threads: int | None) -> None:
    """The job process: worker + scheduler until SIGTERM or until its parent `serve` is gone."""
    from ops.runtime import JobRuntime

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    parent = os.getppid()
    runtime = JobRuntime(worker=worker, scheduler=scheduler, threads=threads)
    runtime.start()
    while not stop.wait(1.0):
        if os.getppid() != parent:  # serve was killed without stopping us
            break
    runtime.stop()
