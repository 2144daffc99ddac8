"""Per-tenant concurrency on the heavy queue: one tenant's backlog does not starve another."""

import time

import pytest

from attachments.models import Attachment
from processing import pipeline
from tests.support import client_for, jpeg_bytes, upload, wait_for_status


@pytest.mark.django_db(transaction=True)
def test_one_tenants_backlog_does_not_starve_another(alice, mallory, live_worker, monkeypatch, settings):
    settings.AIRLOCK_TENANT_CONCURRENCY = 1

    def slow_derive(attachment):
        time.sleep(0.4)  # a heavy decode
        return pipeline.derive(attachment)

    monkeypatch.setitem(pipeline.STEPS, "derive", (slow_derive, None))
    backlog = [upload(client_for(alice), jpeg_bytes((64 + i, 64))) for i in range(10)]
    time.sleep(0.5)  # tenant A's jobs are queued first
    other = upload(client_for(mallory), jpeg_bytes((80, 60)))
    assert wait_for_status(other, ("ready",), timeout=60) == "ready"
    ahead = Attachment.objects.filter(pk__in=backlog, status="ready").count()
    # FIFO without the cap would finish most of A's ten first; with it B waits for at most a few.
    assert ahead <= 4, f"{ahead} of tenant A's files were ready before tenant B's one"
    assert [wait_for_status(i, ("ready",), timeout=60) for i in backlog] == ["ready"] * 10
