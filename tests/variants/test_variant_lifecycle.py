"""Variants' lifecycle: dropped when a file stops being ready (takedown, rescan hit), under the brakes,
known to reconcile both ways, never recorded for a file taken down while one was being made, not counted
in the tenant's usage, purged by staff with an audit row."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from attachments import hooks
from attachments.models import Attachment, Derivative, OutboxMessage, TransitionLog, VariantClaim
from attachments.rescan.services import attachment_rescan_reject
from attachments.services.moderation import attachment_take_down, attachment_variants_purge
from attachments.services.quotas import tenant_usage
from attachments.storage import get_gateway
from sweeper import reconcile
from sweeper.control import sweeper_control_set
from sweeper.reconcile import reconcile_storage
from tests.variants.test_variants import WEBP_ACCEPT, _ready

pytestmark = pytest.mark.django_db


def _made(api, user, attachment_id, *names: str) -> list[str]:
    """Request each variant (WebP and JPEG); the storage keys of what was made."""
    for name in names:
        for accept in (WEBP_ACCEPT, "image/jpeg"):
            got = api(user).get(f"/api/v1/attachments/{attachment_id}/variants/{name}", HTTP_ACCEPT=accept)
            assert got.status_code == 200, got.content
    keys = list(
        Derivative.objects.filter(attachment_id=attachment_id, kind__startswith="variant:").values_list(
            "storage_key", flat=True
        )
    )
    assert len(keys) == 2 * len(names) and all(_exists(key) for key in keys)
    return keys


def _exists(key: str) -> bool:
    return get_gateway().head(key) is not None


def _variant_rows(attachment_id) -> int:
    return Derivative.objects.filter(attachment_id=attachment_id, kind__startswith="variant:").count()


def test_a_takedown_drops_the_variants_rows_and_objects(alice, api, django_capture_on_commit_callbacks):
    attachment_id = _ready(api, alice, size=(900, 600))
    keys = _made(api, alice, attachment_id, "small", "large")
    thumbnail = Derivative.objects.get(attachment_id=attachment_id, kind="thumbnail").storage_key
    VariantClaim.objects.create(
        attachment_id=attachment_id,
        kind="variant:medium:webp",
        failed=True,
        until=timezone.now() + timedelta(minutes=1),
    )
    with django_capture_on_commit_callbacks(execute=True):
        attachment_take_down(attachment_id=attachment_id, actor="staff:mod", note="abuse")
    assert _variant_rows(attachment_id) == 0 and not VariantClaim.objects.exists()
    assert not any(_exists(key) for key in keys)
    assert _exists(thumbnail), "the eager thumbnail stays: staff see what they restore"


def test_a_rescan_hit_drops_the_variants(alice, api, django_capture_on_commit_callbacks):
    attachment_id = _ready(api, alice, size=(900, 600))
    keys = _made(api, alice, attachment_id, "medium")
    with django_capture_on_commit_callbacks(execute=True):
        assert attachment_rescan_reject(attachment_id=attachment_id, signatures="yara=test:2", message="yara: X")
    assert Attachment.objects.get(pk=attachment_id).quarantine_key
    assert _variant_rows(attachment_id) == 0 and not any(_exists(key) for key in keys)


def test_under_the_killswitch_objects_stay_until_reconcile_deletes_them_as_orphans(
    alice, api, monkeypatch, django_capture_on_commit_callbacks
):
    attachment_id = _ready(api, alice, size=(900, 600))
    keys = _made(api, alice, attachment_id, "small")
    sweeper_control_set(killswitch=True, actor="test")
    with django_capture_on_commit_callbacks(execute=True):
        attachment_take_down(attachment_id=attachment_id, actor="staff:mod", note="abuse")
    assert _variant_rows(attachment_id) == 0 and all(_exists(key) for key in keys)  # the brake holds deletes

    monkeypatch.setattr(reconcile, "GRACE_SECONDS", 0)
    later = timezone.now() + timedelta(minutes=1)
    kept = reconcile_storage(now=later)
    assert {(f.key, f.kind, f.action) for f in kept.findings if f.key in keys} == {
        (key, "orphan", "kept") for key in keys
    }
    sweeper_control_set(killswitch=False, actor="test")
    done = reconcile_storage(now=later)
    assert {(f.key, f.kind, f.action) for f in done.findings if f.key in keys} == {
        (key, "orphan", "deleted") for key in keys
    }
    assert not any(_exists(key) for key in keys)


def test_reconcile_drops_a_variant_row_whose_object_is_gone_and_the_next_request_makes_it(alice, api):
    attachment_id = _ready(api, alice, size=(900, 600))
    _made(api, alice, attachment_id, "small")
    lost = Derivative.objects.get(attachment_id=attachment_id, kind="variant:small:webp")
    get_gateway().delete(lost.storage_key)
    jobs_before = OutboxMessage.objects.count()

    report = reconcile_storage()
    assert [(f.kind, f.key, f.action) for f in report.findings] == [("missing_variant", lost.storage_key, "dropped")]
    assert report.counts()["missing_variants_dropped"] == 1 and report.counts()["missing_derivatives"] == 0
    assert OutboxMessage.objects.count() == jobs_before, "no rederive: a variant is made on request"
    assert not Derivative.objects.filter(pk=lost.pk).exists()
    assert Derivative.objects.filter(attachment_id=attachment_id, kind="variant:small:jpeg").exists()
    assert Attachment.objects.get(pk=attachment_id).status == "ready"

    again = api(alice).get(f"/api/v1/attachments/{attachment_id}/variants/small", HTTP_ACCEPT=WEBP_ACCEPT)
    assert again.status_code == 200
    assert _exists(Derivative.objects.get(attachment_id=attachment_id, kind="variant:small:webp").storage_key)


def test_reconcile_under_dry_run_only_says_it_would_drop(alice, api):
    attachment_id = _ready(api, alice, size=(900, 600))
    _made(api, alice, attachment_id, "small")
    lost = Derivative.objects.get(attachment_id=attachment_id, kind="variant:small:webp")
    get_gateway().delete(lost.storage_key)
    report = reconcile_storage(dry_run=True)
    assert [(f.kind, f.action) for f in report.findings] == [("missing_variant", "would_drop")]
    assert Derivative.objects.filter(pk=lost.pk).exists()


def test_a_variant_made_while_its_file_was_taken_down_is_not_kept(alice, api, monkeypatch):
    attachment_id = _ready(api, alice, size=(900, 600))
    real = hooks.variant_renderer()
    made: list = []

    def render_while_a_moderator_acts(source, work_dir, size, fmt):
        attachment_take_down(attachment_id=attachment_id, actor="staff:mod", note="abuse")
        made.append(real(source, work_dir, size, fmt))
        return made[-1]

    monkeypatch.setattr(hooks, "_variant_renderer", [render_while_a_moderator_acts])
    got = api(alice).get(f"/api/v1/attachments/{attachment_id}/variants/small", HTTP_ACCEPT=WEBP_ACCEPT)
    assert got.status_code == 404 and len(made) == 1
    assert _variant_rows(attachment_id) == 0 and not VariantClaim.objects.exists()
    stored = [info.key for info in get_gateway().list_prefix("tenants/") if "variant-" in info.key]
    assert stored == [], "the object made for a file no longer served is deleted"


def test_variants_do_not_count_in_the_tenant_usage(alice, api):
    attachment_id = _ready(api, alice, size=(2400, 1600))
    before = tenant_usage(tenant=alice.membership.tenant)
    _made(api, alice, attachment_id, "small", "medium", "large")
    after = tenant_usage(tenant=alice.membership.tenant)
    assert (after.bytes_used, after.files_used) == (before.bytes_used, before.files_used)


def test_staff_purge_drops_the_variants_and_is_audited(alice, api, django_capture_on_commit_callbacks):
    attachment_id = _ready(api, alice, size=(900, 600))
    keys = _made(api, alice, attachment_id, "small")
    total = sum(Derivative.objects.filter(storage_key__in=keys).values_list("size", flat=True))
    with django_capture_on_commit_callbacks(execute=True):
        purged = attachment_variants_purge(attachment_id=attachment_id, actor="staff:mod")
    assert (purged.count, purged.bytes, purged.kept) == (2, total, "")
    assert _variant_rows(attachment_id) == 0 and not any(_exists(key) for key in keys)
    entry = TransitionLog.objects.get(attachment_id=attachment_id, transition="variants_purged")
    assert entry.actor == "staff:mod" and entry.details == {"variants": 2, "bytes": total}
    assert Attachment.objects.get(pk=attachment_id).status == "ready"
    assert (
        api(alice).get(f"/api/v1/attachments/{attachment_id}/variants/small", HTTP_ACCEPT=WEBP_ACCEPT).status_code
        == 200
    )
