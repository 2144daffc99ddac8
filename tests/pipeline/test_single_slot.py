"""avatar keeps one file per owner: the new one replaces the old only once it is ready AND committed."""

import pytest

from attachments.models import Attachment
from sweeper.sweep import sweep_expired
from tests.support import jpeg_bytes, png_bytes, run_pipeline, upload
from tests.support.fake_clamd import erroring_clamd

pytestmark = pytest.mark.django_db


def _avatar(client, data, content_type="image/jpeg"):
    return upload(client, data, profile="avatar", filename="me.jpg", content_type=content_type)


def _commit(client, *ids, ref="profile:1"):
    return client.post("/api/v1/attachments/commit", {"ids": list(ids), "ref": ref}, format="json")


def _served(client, attachment_id) -> bool:
    return client.get(f"/api/v1/attachments/{attachment_id}/download").status_code == 200


@pytest.fixture
def current(alice, api):
    """alice's committed, ready avatar."""
    old = _avatar(api(alice), jpeg_bytes((100, 100)))
    assert run_pipeline(old) == "ready"
    assert _commit(api(alice), old).status_code == 200
    return old


def _untouched(old) -> None:
    row = Attachment.objects.get(pk=old)
    assert (row.lifecycle, row.status) == ("committed", "ready")


def test_a_ready_replacement_waits_for_its_commit(alice, bob, api, current):
    client = api(alice)
    new = _avatar(client, png_bytes((90, 90)), content_type="image/png")
    assert run_pipeline(new) == "ready"
    _untouched(current)  # picked, not chosen: the old one is still the avatar
    assert _served(api(bob), current)
    assert _commit(client, new, ref="profile:1").status_code == 200
    assert Attachment.objects.get(pk=current).lifecycle == "discarded"
    assert not _served(api(bob), current)
    assert _served(api(bob), new)


def test_a_committed_replacement_takes_the_slot_when_it_becomes_ready(alice, bob, api, current):
    client = api(alice)
    new = _avatar(client, png_bytes((90, 90)), content_type="image/png")
    assert _commit(client, new).status_code == 200  # committed while still pending
    _untouched(current)
    assert _served(api(bob), current)
    assert run_pipeline(new) == "ready"
    assert Attachment.objects.get(pk=current).lifecycle == "discarded"
    assert _served(api(bob), new)


def test_an_abandoned_replacement_is_swept_and_the_old_one_stays(alice, bob, api, current):
    client = api(alice)
    new = _avatar(client, png_bytes((90, 90)), content_type="image/png")
    assert run_pipeline(new) == "ready"
    assert client.post(f"/api/v1/attachments/{new}/discard").status_code in (200, 204)
    report = sweep_expired()
    assert report.deleted == 1
    assert Attachment.objects.get(pk=new).lifecycle == "deleted"
    _untouched(current)
    assert _served(api(bob), current)


def test_a_rejected_replacement_leaves_the_old_one(alice, api, current):
    client = api(alice)
    bad = _avatar(client, b"GIF89a not an allowed avatar type")
    assert _commit(client, bad).status_code == 200  # committed before processing decided
    assert run_pipeline(bad) == "rejected"
    _untouched(current)


def test_a_failed_replacement_leaves_the_old_one(alice, api, current, settings):
    client = api(alice)
    new = _avatar(client, png_bytes((90, 90)), content_type="image/png")
    assert _commit(client, new).status_code == 200
    settings.AIRLOCK_RETRIES = settings.AIRLOCK_RETRIES.replace(max_attempts=1)
    with erroring_clamd(settings):  # up, yet failing every scan: attempts run out
        assert run_pipeline(new) == "failed"
    _untouched(current)


def test_the_latest_commit_wins_and_newer_candidates_wait(alice, api, current):
    client = api(alice)
    first, second, later = (_avatar(client, png_bytes((90 - i, 90)), content_type="image/png") for i in range(3))
    assert {run_pipeline(i) for i in (first, second, later)} == {"ready"}
    assert _commit(client, second).status_code == 200
    rows = {a.pk.hex: a.lifecycle for a in Attachment.objects.filter(profile="avatar")}
    # the old choice and the older candidate go; the newer candidate is the user's to decide
    assert [rows[x.replace("-", "")] for x in (current, first, second, later)] == [
        "discarded",
        "discarded",
        "committed",
        "staged",
    ]
    assert _commit(client, later).status_code == 200
    assert Attachment.objects.get(pk=second).lifecycle == "discarded"
    assert Attachment.objects.get(pk=later).lifecycle == "committed"


def test_other_profiles_and_owners_are_untouched(alice, bob, api):
    mine = _avatar(api(alice), jpeg_bytes())
    image = upload(api(alice), jpeg_bytes())
    theirs = _avatar(api(bob), jpeg_bytes())
    assert {run_pipeline(i) for i in (mine, image, theirs)} == {"ready"}
    assert _commit(api(alice), mine, image).status_code == 200
    assert _commit(api(bob), theirs).status_code == 200
    newer = _avatar(api(alice), jpeg_bytes((70, 70)))
    assert run_pipeline(newer) == "ready"
    assert _commit(api(alice), newer).status_code == 200
    assert Attachment.objects.get(pk=mine).lifecycle == "discarded"
    assert Attachment.objects.get(pk=image).lifecycle == "committed"
    assert Attachment.objects.get(pk=theirs).lifecycle == "committed"
