"""The job side of `manage.py serve`: Dramatiq worker threads and scheduler ticks, started and stopped together."""

from __future__ import annotations

import logging
import threading

import dramatiq
from django.conf import settings
from django.db import close_old_connections

from attachments.services import handoff, outbox
from processing import stages

log = logging.getLogger("airlock.runtime")

QUEUES = stages.QUEUES  # every queue a worker consumes: the stages' and the rescans'


class Workers:
    """The stages' worker and the transcodes' worker of one process, started and stopped together.

    Transcodes (a video's web rendition, minutes of CPU) run on threads of their own,
    AIRLOCK_CONCURRENCY.transcode of them: a photo's steps never wait for a thread
    behind one. Everything else a worker has is the stages' worker's.
    """

    def __init__(self, main: dramatiq.Worker, transcodes: dramatiq.Worker) -> None:
        self.main, self.transcodes = main, transcodes

    def stop(self, timeout: int = 600_000) -> None:
        self.transcodes.stop(timeout=timeout)
        self.main.stop(timeout=timeout)

    def join(self) -> None:
        self.main.join()
        self.transcodes.join()

    def __getattr__(self, name: str):
        return getattr(self.main, name)


def start_worker(*, threads: int | None = None) -> Workers:
    broker = dramatiq.get_broker()
    for queue in (*QUEUES, stages.TRANSCODE_QUEUE):
        broker.declare_queue(queue)
    others = set(broker.get_declared_queues()) - {stages.TRANSCODE_QUEUE}
    worker = dramatiq.Worker(
        broker,
        queues=others,
        worker_threads=threads or settings.AIRLOCK_CONCURRENCY.worker_threads,
        worker_timeout=settings.AIRLOCK_SERVE.worker_poll_ms,
    )
    transcodes = dramatiq.Worker(
        broker,
        queues={stages.TRANSCODE_QUEUE},
        worker_threads=settings.AIRLOCK_CONCURRENCY.transcode,
        worker_timeout=settings.AIRLOCK_SERVE.worker_poll_ms,
    )
    worker.start()
    transcodes.start()
    return Workers(worker, transcodes)


def broker_is_in_process() -> bool:
    """The embedded default's broker lives in this process's memory (messages die with it)."""
    return outbox.broker_in_process()


def run_ticks_once(*, relays_for_commands: bool = False) -> None:
    """One scheduler pass: relay the outbox, recover leases/pending, sweep when due, rescan within budget.

    `relays_for_commands`: this process also runs the worker, so the jobs a
    management command leaves in the outbox get done here; it says so in the
    database (attachments/services/handoff.py) at every tick.
    """
    from attachments.services.renditions import renditions_redrive
    from processing.broker_epoch import check_broker_epoch
    from processing.recovery import recover
    from processing.rescan.jobs import rescan_tick
    from sweeper.schedule import sweep_if_due
    from webhooks.services.tick import run_tick as webhooks_tick

    close_old_connections()
    try:
        if relays_for_commands:
            handoff.jobs_heartbeat_beat(in_process_broker=broker_is_in_process())
        check_broker_epoch()  # first: after Redis lost its state, every file is re-driven at once
        recover()
        sweep_if_due()
        for periodic in (renditions_redrive, webhooks_tick):  # lost transcodes; webhook re-drive and retention
            try:
                periodic()
            except Exception:
                log.exception("tick step failed", extra={"step": periodic.__name__})
    except Exception:
        log.exception("scheduler tick failed")
    try:  # last and on its own: the background rescan never holds back recovery, sweeps or webhooks
        rescan_tick()
    except Exception:
        log.exception("rescan tick failed")
    finally:
        close_old_connections()


class Scheduler(threading.Thread):
    def __init__(self, interval: float | None = None, *, relays_for_commands: bool = False) -> None:
        super().__init__(name="airlock-scheduler", daemon=True)
        self.interval = interval or settings.AIRLOCK_SERVE.tick_seconds
        self.relays_for_commands = relays_for_commands
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            run_ticks_once(relays_for_commands=self.relays_for_commands)

    def stop(self) -> None:
        self.stopping.set()


def release_orphaned_leases() -> int:
    """With an in-process broker, every processing row's next message was in this process's memory.

    Nobody else can be working on them (no other process shares the broker), so
    they go back to pending now instead of waiting out their lease.
    """
    from attachments.models import Attachment, Status
    from attachments.services.processing import attachment_release

    released = 0
    for pk, token in Attachment.objects.filter(status=Status.PROCESSING).values_list("pk", "lease_token")[:10_000]:
        released += attachment_release(attachment_id=pk, token=token, actor="system:shutdown")
    return released


class JobRuntime:
    """Worker threads + scheduler for one process; stop() hands back what is in flight.

    Stopping: consumers stop taking messages, running jobs get `grace_ms` to
    finish, then every lease still held goes back to pending (with a new intake
    job in the outbox) and the sandbox's job processes are killed.
    """

    def __init__(self, *, worker: bool = True, scheduler: bool = True, threads: int | None = None) -> None:
        self.want_worker = worker
        self.want_scheduler = scheduler
        self.threads = threads
        self.worker: Workers | None = None
        self.scheduler: Scheduler | None = None

    def start(self) -> None:
        from processing.recovery import redrive_pending

        if self.want_worker:
            if broker_is_in_process():
                self._guard(release_orphaned_leases, "release orphaned leases")
            self.worker = start_worker(threads=self.threads)
            if broker_is_in_process():
                # Messages of an in-process broker die with the process: re-drive at start.
                self._guard(lambda: redrive_pending(older_than_seconds=0), "re-drive pending files")
        if self.want_scheduler:
            self.scheduler = Scheduler(relays_for_commands=self.want_worker)
            self.scheduler.start()
            if self.want_worker:  # at once, not one tick later: a command started now can hand its jobs over
                self._guard(
                    lambda: handoff.jobs_heartbeat_beat(in_process_broker=broker_is_in_process()),
                    "say the job side is running",
                )
        close_old_connections()

    def stop(self, *, grace_ms: int = 2000) -> None:
        from processing import inflight

        if self.scheduler is not None:
            self.scheduler.stop()
            if self.want_worker:
                self._guard(handoff.jobs_heartbeat_leave, "say the job side stopped")
        if self.worker is not None:
            self.worker.stop(timeout=grace_ms)
            released = self._guard(inflight.release_all, "release leases") or 0
            if broker_is_in_process():
                released += self._guard(release_orphaned_leases, "release orphaned leases") or 0
            if released:
                log.info("leases released on shutdown", extra={"count": released})
            try:
                from processing.sandbox import shutdown

                shutdown()
            except Exception:  # noqa: BLE001 - nothing left to save at exit
                pass
        close_old_connections()

    @staticmethod
    def _guard(fn, what: str):
        try:
            return fn()
        except Exception as exc:  # the database may be down at start or stop: recovery catches up later
            log.warning(f"could not {what}", extra={"error": str(exc)[:300]})
            return None
