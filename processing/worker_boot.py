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

log = logging.getLogger("airlock.worker")


def log_sandbox_confinement() -> str:
    from processing.sandbox import confine

    requested = confine.requested_layers()
    in_force = confine.in_force(requested)
    missing = [layer for layer in requested if layer not in in_force]
    described = confine.describe(in_force)
    note = f" (not available here: {', '.join(missing)})" if missing else ""
    (log.warning if missing else log.info)(
        "sandbox confinement %s%s", described, note, extra={"confinement": described}
    )
    return described


class SandboxConfinementLog(dramatiq.Middleware):
    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        log_sandbox_confinement()


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
