"""Per-person rules through one service token: each of the host's subjects has its own slot, discard-all,
files and limits."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.utils import timezone

from attachments.models import Attachment, Lifecycle
from tests.subjects.support import as_subject
from tests.support import create_intent, jpeg_bytes, png_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db

# Mid-minute, so a rate test never straddles two windows.
FROZEN = datetime(2026, 11, 30, 10, 0, 20, tzinfo=UTC)


def _ready_avatar(client, data: bytes, content_type: str = "image/jpeg") -> str:
    pk = upload(client, data, profile="avatar", filename="me.jpg", content_type=content_type)
    assert run_pipeline(pk) == "ready"
    return pk


def _commit(client, *ids, ref):
    return client.post("/api/v1/attachments/commit", {"ids": list(ids), "ref": ref}, format="json")


def _lifecycle(pk) -> str:
    return Attachment.objects.values_list("lifecycle", flat=True).get(pk=pk)


def test_two_subjects_avatars_through_one_token_both_survive(alice):
    ann, ben = as_subject(alice, "user-ann"), as_subject(alice, "user-ben")
    anns = _ready_avatar(ann, jpeg_bytes((100, 100)))
    assert _commit(ann, anns, ref="profile:ann").status_code == 200
    bens = _ready_avatar(ben, png_bytes((90, 90)), "image/png")
    assert _commit(ben, bens, ref="profile:ben").status_code == 200
    assert (_lifecycle(anns), _lifecycle(bens)) == ("committed", "committed")
    assert ann.get(f"/api/v1/attachments/{anns}/download").status_code == 200
    assert ben.get(f"/api/v1/attachments/{bens}/download").status_code == 200


def test_a_second_avatar_of_the_same_subject_replaces_the_first(alice):
    ann, ben = as_subject(alice, "user-ann"), as_subject(alice, "user-ben")
    bens = _ready_avatar(ben, jpeg_bytes((80, 80)))
    assert _commit(ben, bens, ref="profile:ben").status_code == 200
    first = _ready_avatar(ann, jpeg_bytes((100, 100)))
    assert _commit(ann, first, ref="profile:ann").status_code == 200
    second = _ready_avatar(ann, png_bytes((90, 90)), "image/png")
    assert _commit(ann, second, ref="profile:ann").status_code == 200
    assert _lifecycle(first) == "discarded"
    assert _lifecycle(second) == "committed"
    assert _lifecycle(bens) == "committed"  # another subject's slot is untouched


def test_discard_all_with_the_header_discards_only_that_subjects_staged_files(alice):
    ann, ben, host = as_subject(alice, "user-ann"), as_subject(alice, "user-ben"), as_subject(alice, None)
    anns = [create_intent(ann).json()["id"] for _ in range(2)]
    bens = create_intent(ben).json()["id"]
    hosts = create_intent(host).json()["id"]
    committed = create_intent(ann).json()["id"]
    assert _commit(ann, committed, ref="post:1").status_code == 200

    response = ann.post("/api/v1/attachments/discard-all", {}, format="json")

    assert response.status_code == 200, response.content
    assert response.json() == {"discarded": 2}
    assert {pk: _lifecycle(pk) for pk in [*anns, bens, hosts, committed]} == {
        anns[0]: Lifecycle.DISCARDED,
        anns[1]: Lifecycle.DISCARDED,
        bens: Lifecycle.STAGED,
        hosts: Lifecycle.STAGED,
        committed: Lifecycle.COMMITTED,
    }


def test_a_heartbeat_under_the_header_reports_another_subjects_file_missing(alice):
    bens = create_intent(as_subject(alice, "user-ben")).json()["id"]
    before = Attachment.objects.values_list("expires_at", flat=True).get(pk=bens)
    response = as_subject(alice, "user-ann").post("/api/v1/attachments/heartbeat", {"ids": [bens]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == {"attachments": [], "missing": [bens]}
    assert Attachment.objects.values_list("expires_at", flat=True).get(pk=bens) == before


def test_a_commit_under_the_header_of_another_subjects_file_is_not_found(alice):
    bens = create_intent(as_subject(alice, "user-ben")).json()["id"]
    response = _commit(as_subject(alice, "user-ann"), bens, ref="post:1")
    assert response.status_code == 422, response.content
    assert response.json()["error"]["details"] == {bens: "not_found"}
    assert Attachment.objects.values_list("lifecycle", flat=True).get(pk=bens) == Lifecycle.STAGED


@pytest.mark.parametrize("call", ["discard", "read", "delete"])
def test_another_subjects_file_is_not_found_under_the_header(alice, call):
    bens = create_intent(as_subject(alice, "user-ben")).json()["id"]
    ann = as_subject(alice, "user-ann")
    if call == "discard":
        response = ann.post(f"/api/v1/attachments/{bens}/discard")
    elif call == "delete":
        response = ann.delete(f"/api/v1/attachments/{bens}")
    else:
        response = ann.get(f"/api/v1/attachments/{bens}")
    assert response.status_code == 404, response.content
    assert response.json()["error"]["code"] == "NOT_FOUND"
    row = Attachment.objects.get(pk=bens)
    assert row.lifecycle == Lifecycle.STAGED and not row.ref
    # The host's token without the header still reaches it.
    assert as_subject(alice, None).get(f"/api/v1/attachments/{bens}").status_code == 200


@pytest.fixture
def frozen_now(monkeypatch):
    monkeypatch.setattr(timezone, "now", lambda: FROZEN)
    return FROZEN


def test_the_intent_rate_is_per_subject(alice, settings, frozen_now):
    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(intents_per_minute=3)
    ann, ben = as_subject(alice, "user-ann"), as_subject(alice, "user-ben")
    for _ in range(3):
        assert create_intent(ann).status_code == 201
    refused = create_intent(ann)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "RATE_LIMITED"
    assert create_intent(ben).status_code == 201  # the same token, another person
    assert create_intent(as_subject(alice, None)).status_code == 201  # the host acting as itself


def test_the_outstanding_pending_cap_is_per_subject(alice, settings, frozen_now):
    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(pending_per_subject=2)
    ann, ben = as_subject(alice, "user-ann"), as_subject(alice, "user-ben")
    first = create_intent(ann).json()["id"]
    assert create_intent(ann).status_code == 201
    refused = create_intent(ann)
    assert refused.status_code == 429, refused.content
    assert refused.json()["error"]["details"]["limit"] == 2
    assert create_intent(ben).status_code == 201
    assert create_intent(ben).status_code == 201
    # Ann's own discard frees her room, not Ben's.
    assert ann.post(f"/api/v1/attachments/{first}/discard").status_code == 204
    assert create_intent(ann).status_code == 201
    assert create_intent(ben).status_code == 429


def test_a_release_under_the_header_of_another_subjects_file_is_not_found(alice):
    ben = as_subject(alice, "user-ben")
    bens = create_intent(ben).json()["id"]
    assert _commit(ben, bens, ref="post:1").status_code == 200
    response = as_subject(alice, "user-ann").post("/api/v1/attachments/release", {"ids": [bens]}, format="json")
    assert response.status_code == 422, response.content
    assert response.json()["error"]["details"] == {bens: "not_found"}
    assert _lifecycle(bens) == Lifecycle.COMMITTED
