"""Jobs queued by a management command: who will run them.

With a shared broker (Redis, RabbitMQ) a command sends its jobs like any
process. On the embedded default the broker lives in the memory of the process
that sends: a command's jobs would die with the command, and the files they
were for would wait for serve's slow re-drive. So a command's jobs stay in the
transactional outbox, which the running `serve` relays to its own worker at
every scheduler tick (a few seconds). Whether a `serve` is running is read from
the heartbeat its scheduler writes to the database at each tick; a command
whose whole point is its jobs refuses when there is none.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from ..models import JobsHeartbeat
from . import outbox

SERVE = "serve"


class ServeNotRunning(Exception):
    """The embedded default with no `serve` running: nobody would run this command's jobs."""


@dataclass(frozen=True)
class Handoff:
    mode: str  # "broker": sent directly; "serve": left for the running serve; "outbox": left for the next serve
    note: str  # one sentence for the command's output


def stale_after() -> timedelta:
    """A serve whose last beat is older than this is taken for stopped (three ticks, at least a minute).

    Generous on purpose: a tick busy with a long sweep must not make a command
    refuse, and a serve taken for alive that is not loses nothing (its jobs wait
    in the outbox for the next serve, which relays them at its first tick).
    """
    return timedelta(seconds=max(60.0, 3 * float(settings.AIRLOCK_SERVE.tick_seconds)))


def jobs_heartbeat_beat(*, in_process_broker: bool, now: datetime | None = None) -> None:
    """The running serve's job side is alive (its scheduler calls this every tick)."""
    JobsHeartbeat.objects.update_or_create(
        name=SERVE,
        defaults={
            "beat_at": now or timezone.now(),
            "in_process_broker": in_process_broker,
            "holder": f"{socket.gethostname()}:{os.getpid()}"[:200],
        },
    )


def jobs_heartbeat_leave() -> None:
    """A serve stopping on purpose says so: a command started after it refuses at once instead of 15 s later."""
    JobsHeartbeat.objects.filter(name=SERVE, holder=f"{socket.gethostname()}:{os.getpid()}"[:200]).delete()


def serve_running(*, now: datetime | None = None) -> JobsHeartbeat | None:
    """The heartbeat of a serve that beat recently, or None."""
    beat = JobsHeartbeat.objects.filter(name=SERVE).first()
    if beat is None or beat.beat_at < (now or timezone.now()) - stale_after():
        return None
    return beat


def command_enqueues(command: str, *, require_serve: bool, now: datetime | None = None) -> Handoff:
    """Prepare this command's process to queue jobs; raise ServeNotRunning when `require_serve` and none runs."""
    if not outbox.broker_in_process():
        return Handoff("broker", "")
    outbox.relay_elsewhere()
    beat = serve_running(now=now)
    if beat is not None:
        return Handoff(SERVE, f"jobs handed to the running serve ({beat.holder}) through the outbox")
    if require_serve:
        raise ServeNotRunning(
            f"{command}: no `manage.py serve` is running. On the embedded default (in-process broker) the jobs "
            f"this command queues are run by serve's worker, and files would wait until it starts. Start "
            f"`manage.py serve` first (or use --dry-run to see what would be done)."
        )
    return Handoff("outbox", "no serve is running: its jobs wait in the outbox until `manage.py serve` starts")
