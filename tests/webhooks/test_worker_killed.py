"""kill -9 of the job process (`serve --jobs-only`) mid-delivery: no event is lost, ids stay the same.

The job process runs against this test's database and broker (Redis with
REDIS_URL; without it the in-process broker of the job process itself, whose
messages die with it). The receiver holds the first requests open, so the
process is killed with deliveries in flight; a second job process then delivers
every event: what was in flight again with the same webhook-id (its lease
expires and the tick re-drives it), what was queued or never sent by the tick.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from attachments.services.moderation import attachment_take_down
from tests.faults.support import broker_namespace, descendants, wait_gone
from tests.support import jpeg_bytes, upload
from tests.support.env import with_group_keys
from webhooks.models import DeliveryStatus, WebhookDelivery, WebhookEvent

from .conftest import verified
from .receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[2]
EVENTS = 12


class JobProcess:
    """`manage.py serve --jobs-only` (worker + scheduler) on this test's database and broker namespace."""

    def __init__(self, tmp: Path) -> None:
        env = dict(os.environ)
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "tests.faults.worker_settings",
                "AIRLOCK_FAULT_DB_NAME": str(connection.settings_dict["NAME"]),
                "AIRLOCK_FAULT_KEY_PREFIX": settings.AIRLOCK_KEY_PREFIX,
                "AIRLOCK_STORAGE": "local",
                "AIRLOCK_STORAGE_ROOT": str(settings.AIRLOCK_STORAGE_ROOT),
                "AIRLOCK_WEBHOOK_ALLOW_PRIVATE": "1",
                "AIRLOCK_LOG_LEVEL": "WARNING",
                "PYTHONUNBUFFERED": "1",
            }
        )
        with_group_keys(env, "AIRLOCK_WEBHOOK_DELIVERY", timeout_seconds=2, retry_base_seconds=0.2, redrive_seconds=1)
        with_group_keys(env, "AIRLOCK_SERVE", tick_seconds=0.5)
        # The dead process's endpoint slots (processing/fairness.py) are freed when its worker
        # has been silent for a lease, which wakes the deliveries parked behind them.
        with_group_keys(env, "AIRLOCK_RETRIES", lease_seconds=8)
        with_group_keys(env, "AIRLOCK_CONCURRENCY", worker_threads=2)
        namespace = broker_namespace()
        if namespace:
            env["AIRLOCK_FAULT_NAMESPACE"] = namespace
        self.log_path = tmp / f"jobs-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--jobs-only"],
            cwd=REPO,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def kill(self) -> None:
        """SIGKILL the process and everything below it (sandbox fork server): no cleanup code runs."""
        pids = {self.proc.pid, *descendants(self.proc.pid)}
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=30)
        assert not wait_gone(pids)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]


def test_no_delivery_is_lost_when_the_worker_is_killed_mid_delivery(alice, api, make_endpoint, tmp_path):
    release = threading.Event()

    def respond(request):
        # Hold requests until the test has killed the first job process.
        if not release.is_set():
            release.wait(20)
        return 204, b"", 0.0

    receiver = Receiver(respond).start()
    first = second = None
    try:
        endpoint = make_endpoint(receiver.url)
        ids = [upload(api(alice), jpeg_bytes((40 + i, 30))) for i in range(EVENTS)]
        for attachment_id in ids:  # each a committed transition with its event, before any worker runs
            attachment_take_down(attachment_id=attachment_id, actor="staff:test", note="test")
        events = set(WebhookEvent.objects.values_list("pk", flat=True))
        assert len(events) == EVENTS

        first = JobProcess(tmp_path)
        in_flight = receiver.wait_for(lambda r: len(r) >= 1, timeout=90)
        time.sleep(0.3)  # let the second worker thread pick one up too
        first.kill()
        in_flight = {r.webhook_id for r in receiver.received}
        assert in_flight and WebhookDelivery.objects.filter(status=DeliveryStatus.DELIVERED).count() == 0
        release.set()  # the held requests get answers nobody reads

        second = JobProcess(tmp_path)
        deadline = time.monotonic() + 90
        while WebhookDelivery.objects.filter(status=DeliveryStatus.DELIVERED).count() < EVENTS:
            assert time.monotonic() < deadline, f"not all delivered:\n{second.log()}"
            time.sleep(0.2)
        got = receiver.received
        assert {r.webhook_id for r in got} == events  # nothing lost
        for webhook_id in in_flight:  # what was in flight came again, with the same id
            assert sum(r.webhook_id == webhook_id for r in got) >= 2
        for r in got:
            assert verified(r, endpoint.secret)["type"] == "attachment.deleted"
        assert not WebhookDelivery.objects.exclude(status=DeliveryStatus.DELIVERED).exists()
    finally:
        release.set()
        for process in (first, second):
            if process is not None:
                process.stop()
        receiver.stop()
