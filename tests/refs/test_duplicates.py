"""duplicate_of: the same bytes as an earlier available file of the same ref (or subject); `duplicates: reject`."""

from __future__ import annotations

import copy

import pytest

from attachments.models import Attachment, TransitionLog
from tests.refs.archive_support import commit
from tests.subjects.support import as_subject
from tests.support import jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db

PHOTO = jpeg_bytes((80, 60), color=(10, 120, 200))
OTHER = jpeg_bytes((80, 60), color=(200, 120, 10))


def _ready(client, data: bytes = PHOTO) -> str:
    pk = upload(client, data)
    assert run_pipeline(pk) == "ready"
    return pk


def _resource(client, pk: str) -> dict:
    response = client.get(f"/api/v1/attachments/{pk}")
    assert response.status_code == 200, response.content
    return response.json()


def test_the_same_photo_twice_to_one_ref_names_the_first(alice, api):
    client = api(alice)
    first = _ready(client)
    commit(client, [first], "wedding")
    second = _ready(client)
    commit(client, [second], "wedding")
    assert _resource(client, second)["duplicate_of"] == first
    assert _resource(client, first)["duplicate_of"] is None
    # Another photo in the same ref is no duplicate.
    other = _ready(client, OTHER)
    commit(client, [other], "wedding")
    assert _resource(client, other)["duplicate_of"] is None


def test_committed_before_it_is_ready_it_is_judged_in_its_ref_when_ready(alice, api):
    client = api(alice)
    first = _ready(client)
    commit(client, [first], "wedding")
    second = upload(client, PHOTO)
    commit(client, [second], "wedding")  # pending: judged when it becomes ready
    assert Attachment.objects.get(pk=second).duplicate_of is None
    assert run_pipeline(second) == "ready"
    assert _resource(client, second)["duplicate_of"] == first


def test_two_copies_committed_together_flag_the_later_one(alice, api):
    client = api(alice)
    first, second = as_subject(alice, "guest-1"), as_subject(alice, "guest-2")  # no subject-level flag first
    a, b = _ready(first), _ready(second)
    assert (_resource(client, a)["duplicate_of"], _resource(client, b)["duplicate_of"]) == (None, None)
    commit(client, [b, a], "wedding")
    assert (_resource(client, a)["duplicate_of"], _resource(client, b)["duplicate_of"]) == (None, a)


def test_the_same_photo_in_another_ref_is_not_flagged(alice, api):
    client = api(alice)
    first = _ready(client)
    commit(client, [first], "wedding")
    second = _ready(client)
    assert _resource(client, second)["duplicate_of"] == first  # a draft of the same subject, so far
    commit(client, [second], "honeymoon")
    assert _resource(client, second)["duplicate_of"] is None  # its ref decides once it has one


def test_without_a_ref_the_same_subject_is_flagged_and_another_subject_is_not(alice, api):
    guest, other_guest = as_subject(alice, "guest-1"), as_subject(alice, "guest-2")
    first = _ready(guest)
    again = _ready(guest)
    elsewhere = _ready(other_guest)
    assert _resource(guest, again)["duplicate_of"] == first
    assert _resource(other_guest, elsewhere)["duplicate_of"] is None
    assert _resource(guest, first)["duplicate_of"] is None


def test_another_tenant_never_sees_a_twin(alice, mallory, api):
    _ready(api(alice))
    theirs = _ready(api(mallory))
    assert _resource(api(mallory), theirs)["duplicate_of"] is None


def test_a_discarded_first_is_no_twin_for_a_later_upload(alice, api):
    client = api(alice)
    first = _ready(client)
    assert client.post(f"/api/v1/attachments/{first}/discard").status_code in (200, 204)
    later = _ready(client)
    assert _resource(client, later)["duplicate_of"] is None


def test_a_rescan_of_the_first_never_makes_it_the_copy(alice, api):
    from attachments.services.moderation import attachment_reprocess

    client = api(alice)
    first = _ready(client)
    second = _ready(client)
    attachment_reprocess(attachment_id=first, actor="staff:test")
    assert run_pipeline(first) == "ready"
    assert (_resource(client, first)["duplicate_of"], _resource(client, second)["duplicate_of"]) == (None, first)


@pytest.fixture
def rejecting(settings):
    profiles = copy.deepcopy(settings.AIRLOCK_PROFILES)
    profiles["image"]["duplicates"] = "reject"
    settings.AIRLOCK_PROFILES = profiles


def test_a_profile_that_rejects_duplicates_rejects_the_second_copy(alice, api, rejecting):
    client = api(alice)
    first = _ready(client)
    commit(client, [first], "wedding")
    second = upload(client, PHOTO)
    commit(client, [second], "wedding")
    assert run_pipeline(second) == "rejected"
    body = _resource(client, second)
    assert body["reason"]["code"] == "duplicate" and first in body["reason"]["message"]
    assert body["available"] is False and body["duplicate_of"] is None
    assert TransitionLog.objects.filter(attachment_id=second, transition="reject", reason_code="duplicate").exists()
    # Another photo, and the same photo for another subject, are kept.
    assert run_pipeline(upload(client, OTHER)) == "ready"
    assert run_pipeline(upload(as_subject(alice, "guest-9"), PHOTO)) == "ready"


def test_a_commit_never_rejects_even_when_the_profile_does(alice, api, rejecting):
    guest, other_guest = as_subject(alice, "guest-1"), as_subject(alice, "guest-2")
    first, second = _ready(guest), _ready(other_guest)
    commit(api(alice), [first, second], "wedding")
    body = _resource(api(alice), second)
    assert (body["status"], body["duplicate_of"]) == ("ready", first)


def test_an_unknown_duplicates_policy_is_a_configuration_error(settings):
    from django.core.exceptions import ImproperlyConfigured

    from attachments.profiles import all_profiles

    profiles = copy.deepcopy(settings.AIRLOCK_PROFILES)
    profiles["image"]["duplicates"] = "merge"
    settings.AIRLOCK_PROFILES = profiles
    with pytest.raises(ImproperlyConfigured, match="duplicates"):
        all_profiles()
