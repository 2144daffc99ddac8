"""Dramatiq middleware: each worker process says at boot what confinement its decoders get, and beats while it runs.

In every worker (`rundramatiq` and `manage.py serve`'s in-process one), before the first
job, so an operator sees a weaker sandbox (no Landlock on this kernel, not root, a layer
switched off) in the start log rather than after an incident. The fork server logs the
confinement it really applied again when it starts (processing/sandbox/runner.py).
"""

from __future__ import annotations

import logging

import dramatiq

from .liveness import Heartbeat
from .spool import remove_leftovers

log = logging.getLogger("airlock.worker")


def log_sandbox_confinement() -> str:
    from processing.sandbox import confine

    posture = confine.posture()
    described = confine.describe(posture.in_force)
    # refused: no decoder job will run here (confine.py: confinement fails closed)
    complete = posture.state.startswith("complete")
    level = log.error if posture.refused else log.info if complete else log.warning
    level(
        "sandbox confinement %s (%s)",
        described,
        posture.state,
        extra={"confinement": described, "confinement_state": posture.state},
    )
    return described


class SandboxConfinementLog(dramatiq.Middleware):
    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        log_sandbox_confinement()


class SignaturesAtBoot(dramatiq.Middleware):
    """Each worker says which signatures it scans with, and whether files wait for a rescan with them."""

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        from django.db import close_old_connections

        from .rescan.jobs import note_signatures_at_boot  # reads the database: Django is ready by now

        try:
            note_signatures_at_boot()
        except Exception as exc:  # noqa: BLE001 - the database may be down at boot: the scheduler's tick catches up
            log.warning(
                "could not compare the signatures in force with the rescan walk's", extra={"error": str(exc)[:300]}
            )
        finally:
            close_old_connections()


class SpoolLeftovers(dramatiq.Middleware):
    """Each worker removes, before its first job, the spool directories of workers that died without cleaning up."""

    def before_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        remove_leftovers()


class WorkerHeartbeat(dramatiq.Middleware):
    """Each worker beats while it runs (processing/liveness.py), from before its first message to after its last."""

    def __init__(self) -> None:
        self._beats: dict[int, Heartbeat] = {}

    def before_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        beat = Heartbeat()
        beat.beat_once()  # registered before any message is fetched: a kill a moment later is still noticed
        beat.start()
        self._beats[id(worker)] = beat

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        beat = self._beats.pop(id(worker), None)
        if beat is not None:
            beat.stop()
