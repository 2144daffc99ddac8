"""Every lifecycle change is audited with its actor and shows on the attachment's admin timeline."""

import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.models import Attachment, TransitionLog
from attachments.services.lifecycle import attachments_heartbeat
from sweeper.sweep import sweep_expired
from tests.support import client_for, jpeg_bytes, png_bytes, put_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db


def _entries(pk) -> list[tuple[str, str, str, str]]:
    return list(
        TransitionLog.objects.filter(attachment_id=pk)
        .order_by("id")
        .values_list("transition", "from_status", "to_status", "actor")
    )


def _commit(user, *ids, ref="post:1"):
    response = client_for(user).post("/api/v1/attachments/commit", {"ids": list(ids), "ref": ref}, format="json")
    assert response.status_code == 200, response.content


def test_commit_discard_discard_all_and_sweep_delete_name_their_actor(alice):
    client = client_for(alice)
    kept, dropped, *drafts = (upload(client, jpeg_bytes()) for _ in range(4))
    _commit(alice, kept)
    assert client.post(f"/api/v1/attachments/{dropped}/discard").status_code == 204
    assert client.post("/api/v1/attachments/discard-all").json()["discarded"] == 2

    assert ("commit", "staged", "committed", "user:alice") in _entries(kept)
    assert TransitionLog.objects.get(attachment_id=kept, transition="commit").message == "ref post:1"
    assert ("discard", "staged", "discarded", "user:alice") in _entries(dropped)
    for pk in drafts:
        assert ("discard_all", "staged", "discarded", "user:alice") in _entries(pk)

    sweep_expired()
    for pk in (dropped, *drafts):
        assert ("sweep_delete", "discarded", "deleted", "system:sweep") in _entries(pk)
    assert not any(e[0] == "sweep_delete" for e in _entries(kept))


def test_replacement_is_audited_with_the_user_who_chose(alice):
    client = client_for(alice)
    old = upload(client, jpeg_bytes(), profile="avatar", filename="me.jpg")
    new = upload(client, png_bytes(), profile="avatar", filename="me.png", content_type="image/png")
    assert {run_pipeline(old), run_pipeline(new)} == {"ready"}
    _commit(alice, old)
    _commit(alice, new)
    entry = TransitionLog.objects.get(attachment_id=old, transition="replace")
    assert (entry.from_status, entry.to_status, entry.actor) == ("committed", "discarded", "user:alice")
    assert entry.message == f"replaced by {new}"


def test_staff_changes_show_on_the_timeline_with_the_staff_member(moderator, alice, ready_image, browser_for):
    staff = browser_for(moderator)
    staff.post(f"/admin/attachments/attachment/{ready_image}/moderate/take_down/", {"post": "yes", "note": "spam"})
    staff.post(f"/admin/attachments/attachment/{ready_image}/moderate/restore/", {"post": "yes"})
    staff.post(f"/admin/attachments/attachment/{ready_image}/moderate/discard/", {"post": "yes"})
    entries = _entries(ready_image)
    assert ("take_down", "ready", "rejected", "staff:mod") in entries
    assert ("restore", "rejected", "pending", "staff:mod") in entries
    assert ("discard", "staged", "discarded", "staff:mod") in entries

    page = staff.get(f"/admin/attachments/attachment/{ready_image}/change/").content.decode()
    for text in ("take_down", "restore", "discard", "staff:mod"):
        assert text in page


def _events(pk, event):
    return list(TransitionLog.objects.filter(attachment_id=pk, transition=event).order_by("id"))


def test_an_upload_is_audited_from_intent_to_scan_with_its_facts_and_actors(alice):
    data = jpeg_bytes()
    pk = upload(client_for(alice), data)
    assert run_pipeline(pk) == "ready"

    story = [entry[0] for entry in _entries(pk)]
    assert story == ["intent", "arrived", "scan", "start", "finish"], story  # intake ran the scan before the start
    [intent] = _events(pk, "intent")
    assert intent.actor == "user:alice"
    assert intent.details == {
        "profile": "image",
        "subject": "alice",
        "declared_size": len(data),
        "declared_type": "image/jpeg",
    }
    [arrived] = _events(pk, "arrived")
    assert arrived.actor == "worker"
    assert arrived.details == {"stored_size": len(data), "content_type": "image/jpeg"}  # no digest declared
    [scan] = _events(pk, "scan")
    # what the scan step reports today (its duration); scanner versions are new keys of the same dict
    assert scan.actor == "worker" and "duration_ms" in scan.details
    # events are not status changes: the dashboard's "transitions into" counts skip them
    assert (intent.from_status, intent.to_status, scan.from_status, scan.to_status) == ("", "", "", "")


def test_a_declared_digest_is_on_the_intents_entry(alice):
    data = png_bytes()
    digest = hashlib.sha256(data).hexdigest()
    response = client_for(alice).post(
        "/api/v1/uploads",
        {
            "profile": "image",
            "filename": "a.png",
            "size": len(data),
            "content_type": "image/png",
            "sha256": digest,
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    pk = response.json()["id"]
    [intent] = _events(pk, "intent")
    assert intent.details["declared_sha256"] == digest
    assert put_bytes(response.json()["upload"]["url"], data, content_type="image/png").status_code == 202
    assert run_pipeline(pk) == "ready"
    [arrived] = _events(pk, "arrived")  # intake checked the bytes against it: the arrival carries it
    assert arrived.details == {"stored_size": len(data), "content_type": "image/png", "sha256": digest}


def test_heartbeat_extensions_are_audited_once_per_hour_gained_in_one_row_per_file(alice):
    pk = upload(client_for(alice), jpeg_bytes())
    original = Attachment.objects.get(pk=pk).expires_at
    base = timezone.now().replace(minute=5, second=0, microsecond=0) + timedelta(days=1)
    for minutes in (0, 10, 20):  # a client heartbeating every ten minutes
        attachments_heartbeat(user=alice, ids=[pk], now=base + timedelta(minutes=minutes))
    [first] = _events(pk, "heartbeat")
    assert first.details["count"] == 1 and first.details["was"] == original.isoformat()
    attachments_heartbeat(user=alice, ids=[pk], now=base + timedelta(hours=2))

    [entry] = _events(pk, "heartbeat")  # folded into the file's one heartbeat row
    row = Attachment.objects.get(pk=pk)
    assert entry.actor == "user:alice" and entry.pk > first.pk
    assert entry.details == {
        "expires_at": row.expires_at.isoformat(),
        "was": original.isoformat(),  # the expiry before the first extension
        "since": first.created_at.isoformat(),
        "count": 2,
    }


def test_a_heartbeat_through_the_api_names_its_user(alice):
    client = client_for(alice)
    pk = upload(client, jpeg_bytes())
    # A draft a day from its expiry: the heartbeat gives it days more (a fresh upload would gain only milliseconds).
    Attachment.objects.filter(pk=pk).update(expires_at=timezone.now() + timedelta(days=1))
    response = client.post("/api/v1/attachments/heartbeat", {"ids": [pk]}, format="json")
    assert response.status_code == 200, response.content
    assert [(e.actor, e.transition) for e in _events(pk, "heartbeat")] == [("user:alice", "heartbeat")]
