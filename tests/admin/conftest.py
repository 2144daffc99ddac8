"""Fixtures for the moderation console: staff users and attachments in known states."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.support import client_for, jpeg_bytes, make_staff, run_pipeline, upload


@pytest.fixture
def acme_mod():
    return make_staff("acme-mod")


@pytest.fixture
def platform_mod():
    return make_staff("ops-mod", "--platform")


@pytest.fixture
def moderator(make_user):
    from attachments.services.staff import moderator_group_ensure, platform_staff_group_ensure

    user = make_user("mod", tenant="staff", staff=True)
    user.groups.add(moderator_group_ensure(), platform_staff_group_ensure())  # platform staff: every tenant
    return user


@pytest.fixture
def viewer(make_user):
    """Staff who may look at attachments but not moderate them."""
    from django.contrib.auth.models import Permission

    from attachments.services.staff import platform_staff_group_ensure

    user = make_user("viewer", tenant="staff", staff=True)
    user.groups.add(platform_staff_group_ensure())
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_attachment", "view_transitionlog", "view_deadletter"])
    )
    return user


@pytest.fixture
def browser_for():
    """A Django test client signed in as the user (session auth, like the admin)."""

    def make(user) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return make


@pytest.fixture
def ready_image(alice):
    attachment_id = upload(client_for(alice), jpeg_bytes((320, 240)), filename="sunset.jpg")
    assert run_pipeline(attachment_id) == "ready"
    return attachment_id


@pytest.fixture
def fail_scans(monkeypatch, settings):
    """Make every scan a scanner error: two attempts, then failed + dead letter.

    The scanners themselves fail, so the scan errs wherever it runs (intake runs it).
    """
    from processing import scanners
    from processing.scanners import ScannerError

    def broken_scan(*args, **kwargs):
        raise ScannerError("clamd: connection refused")

    settings.AIRLOCK_RETRIES = settings.AIRLOCK_RETRIES.replace(max_attempts=2)
    monkeypatch.setattr(scanners, "scan_all", broken_scan)


@pytest.fixture
def failed_image(alice, fail_scans):
    """A failed attachment with one scan retry in its history and an open dead letter."""
    attachment_id = upload(client_for(alice), jpeg_bytes((64, 64)), filename="flaky.jpg")
    assert run_pipeline(attachment_id) == "pending"  # first scanner error: retried
    assert run_pipeline(attachment_id) == "failed"  # second: out of attempts
    return attachment_id
