"""In-process worker and scheduler ticks for `manage.py serve` (the embedded default)."""

from __future__ import annotations

import logging
import threading

import dramatiq
from django.conf import settings
from django.db import close_old_connections

log = logging.getLogger("airlock.runtime")

QUEUES = ("intake", "scan", "derive")


def start_worker(*, threads: int | None = None) -> dramatiq.Worker:
    broker = dramatiq.get_broker()
    for queue in QUEUES:
        broker.declare_queue(queue)
    worker = dramatiq.Worker(broker, worker_threads=threads or settings.AIRLOCK_WORKER_THREADS, worker_timeout=200)
    worker.start()
    return worker


def run_ticks_once() -> None:
    """One scheduler pass: relay the outbox, recover leases/pending, sweep when due."""
    from sweeper.schedule import sweep_if_due

    from .recovery import recover

    close_old_connections()
    try:
        recover()
        sweep_if_due()
    except Exception:
        log.exception("scheduler tick failed")
    finally:
        close_old_connections()


class Scheduler(threading.Thread):
    def __init__(self, interval: float | None = None) -> None:
        super().__init__(name="airlock-scheduler", daemon=True)
        self.interval = interval or settings.AIRLOCK_TICK_SECONDS
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            run_ticks_once()

    def stop(self) -> None:
        self.stopping.set()
