"""Release by ref or ids, DELETE of one file, restore within the grace, and the sweep after it (issue #29)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.models import Attachment, Lifecycle, TransitionLog
from attachments.retention.services.release import attachment_restore, attachments_release
from attachments.services.quotas import tenant_usage
from attachments.services.staff import moderator_group_ensure
from sweeper.control import sweeper_control_set
from sweeper.sweep import sweep_expired
from tests.sweeper.support import DAY, T0, files_of, make_attachment

pytestmark = pytest.mark.django_db

GRACE = timedelta(days=1)


def _committed(owner, ref="ad:42", *, created_at=None, **fields):
    attachment = make_attachment(
        owner, created_at=created_at or timezone.now(), lifecycle=Lifecycle.COMMITTED, **fields
    )
    Attachment.objects.filter(pk=attachment.pk).update(ref=ref)
    attachment.ref = ref
    return attachment


def _lifecycles(*attachments) -> list[str]:
    return [Attachment.objects.get(pk=a.pk).lifecycle for a in attachments]


def _release(client, body):
    return client.post("/api/v1/attachments/release", body, format="json")


@pytest.fixture
def moderator(make_user):
    user = make_user("mod", tenant="acme")
    user.groups.add(moderator_group_ensure())
    return user


def test_release_by_ref_releases_the_callers_files_of_that_ref_only(alice, bob, api):
    photos = [_committed(alice) for _ in range(3)]
    other_ref = _committed(alice, ref="ad:43")
    bobs = _committed(bob)  # same tenant, same ref: not alice's to release
    before = timezone.now()

    response = _release(api(alice), {"ref": "ad:42"})

    assert response.status_code == 200
    assert sorted(response.json()["released"]) == sorted(str(a.pk) for a in photos)
    for photo in photos:
        photo.refresh_from_db()
        assert photo.lifecycle == Lifecycle.RELEASED and photo.ref == "ad:42"
        assert before + GRACE <= photo.expires_at <= timezone.now() + GRACE
        assert photo.released_at is not None
    assert _lifecycles(other_ref, bobs) == [Lifecycle.COMMITTED, Lifecycle.COMMITTED]
    log = TransitionLog.objects.filter(attachment_id=photos[0].pk, transition="release").get()
    assert (log.from_status, log.to_status, log.actor) == ("committed", "released", "user:alice")


def test_releasing_twice_is_fine_and_keeps_the_first_grace(alice, api):
    photo = _committed(alice)
    first = _release(api(alice), {"ids": [str(photo.pk)]})
    photo.refresh_from_db()
    grace_end = photo.expires_at

    again_by_ids = _release(api(alice), {"ids": [str(photo.pk)]})
    again_by_ref = _release(api(alice), {"ref": "ad:42"})

    assert first.status_code == again_by_ids.status_code == again_by_ref.status_code == 200
    assert again_by_ids.json() == again_by_ref.json() == {"released": [str(photo.pk)]}
    photo.refresh_from_db()
    assert photo.lifecycle == Lifecycle.RELEASED and photo.expires_at == grace_end
    assert TransitionLog.objects.filter(attachment_id=photo.pk, transition="release").count() == 1


def test_release_of_an_unknown_ref_releases_nothing(alice, api):
    photo = _committed(alice)
    response = _release(api(alice), {"ref": "ad:nope"})
    assert response.status_code == 200 and response.json() == {"released": []}
    assert _lifecycles(photo) == [Lifecycle.COMMITTED]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"ref": "ad:42", "ids": []},
        {"ref": "ad:42", "ids": ["x"]},
        {"ids": []},
        {"ids": "not a list"},
        {"ref": ""},
        {"ref": 42},
        {"ref": "x" * 201},
        {"ids": [str(uuid.uuid4()) for _ in range(1001)]},
    ],
)
def test_release_bodies_that_are_not_exactly_one_of_ref_and_ids_are_400(alice, api, body):
    photo = _committed(alice)
    response = _release(api(alice), body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert _lifecycles(photo) == [Lifecycle.COMMITTED]


def test_release_by_ids_is_all_or_nothing(alice, bob, mallory, api):
    mine = _committed(alice)
    staged = make_attachment(alice, created_at=timezone.now(), files=False)
    bobs = _committed(bob)
    mallorys = _committed(mallory)
    unknown = uuid.uuid4()

    response = _release(
        api(alice), {"ids": [str(mine.pk), str(staged.pk), str(bobs.pk), str(mallorys.pk), str(unknown), "garbage"]}
    )

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "ATTACHMENT_INVALID"
    assert error["details"] == {
        str(staged.pk): "not_committed",
        str(bobs.pk): "not_found",
        str(mallorys.pk): "not_found",
        str(unknown): "not_found",
        "garbage": "not_found",
    }
    assert _lifecycles(mine, staged, bobs, mallorys) == [
        Lifecycle.COMMITTED,
        Lifecycle.STAGED,
        Lifecycle.COMMITTED,
        Lifecycle.COMMITTED,
    ]


def test_a_released_file_is_not_served_and_the_resource_says_so(alice, bob, api):
    photo = _committed(alice)
    client = api(alice)
    url = f"/api/v1/attachments/{photo.pk}"
    live = client.get(url).json()
    assert live["lifecycle"] == "committed" and set(live["links"]) == {"self", "download", "thumbnail", "variants"}
    assert client.get(f"{url}/download").status_code == 200

    assert _release(client, {"ref": "ad:42"}).status_code == 200

    body = client.get(url).json()
    assert body["status"] == "ready" and body["lifecycle"] == "released" and body["committed"] is False
    assert body["links"] == {"self": body["links"]["self"]}
    assert body["expires_at"] is not None  # the end of the grace
    for path in (f"{url}/download", f"{url}/thumbnail"):
        assert client.get(path).status_code == 404
    assert api(bob).get(url).status_code == 404  # the tenant sees only what is served


@pytest.mark.parametrize("lifecycle", [Lifecycle.DISCARDED, Lifecycle.DELETED])
def test_the_resource_names_each_lifecycle(alice, api, lifecycle):
    attachment = make_attachment(alice, created_at=timezone.now(), lifecycle=lifecycle, files=False)
    response = api(alice).get(f"/api/v1/attachments/{attachment.pk}")
    if lifecycle == Lifecycle.DELETED:
        assert response.status_code == 404
        return
    body = response.json()
    assert body["status"] == "ready" and body["lifecycle"] == "discarded" and "download" not in body["links"]


def test_delete_discards_a_staged_file_and_releases_a_committed_one(alice, api):
    staged = make_attachment(alice, created_at=timezone.now(), files=False)
    committed = _committed(alice)
    client = api(alice)

    for attachment in (staged, committed, staged, committed):  # twice each: idempotent
        assert client.delete(f"/api/v1/attachments/{attachment.pk}").status_code == 204

    staged.refresh_from_db()
    committed.refresh_from_db()
    assert staged.lifecycle == Lifecycle.DISCARDED and staged.expires_at <= timezone.now()
    assert committed.lifecycle == Lifecycle.RELEASED and committed.expires_at > timezone.now() + GRACE / 2
    assert TransitionLog.objects.filter(attachment_id=committed.pk, transition="release").count() == 1


@pytest.mark.parametrize("who", ["bob", "mallory", "unknown", "malformed"])
def test_delete_and_restore_of_what_the_caller_may_not_touch_is_404(alice, bob, mallory, api, who):
    attachment = _committed(alice)
    caller = {"bob": bob, "mallory": mallory}.get(who, alice)
    target = {"unknown": uuid.uuid4(), "malformed": "nope"}.get(who, attachment.pk)
    for method, path in (("delete", ""), ("post", "/restore")):
        response = getattr(api(caller), method)(f"/api/v1/attachments/{target}{path}")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "NOT_FOUND"
    assert _lifecycles(attachment) == [Lifecycle.COMMITTED]


def test_restore_within_the_grace_commits_it_again_and_serves_it(alice, api):
    photo = _committed(alice)
    client = api(alice)
    assert client.delete(f"/api/v1/attachments/{photo.pk}").status_code == 204

    first = client.post(f"/api/v1/attachments/{photo.pk}/restore")
    second = client.post(f"/api/v1/attachments/{photo.pk}/restore")

    assert first.status_code == second.status_code == 204
    photo.refresh_from_db()
    assert (photo.lifecycle, photo.ref, photo.expires_at, photo.released_at) == (
        Lifecycle.COMMITTED,
        "ad:42",
        None,
        None,
    )
    assert client.get(f"/api/v1/attachments/{photo.pk}/download").status_code == 200
    log = TransitionLog.objects.filter(attachment_id=photo.pk, transition="restore").get()
    assert (log.from_status, log.to_status, log.actor) == ("released", "committed", "user:alice")


def test_restore_after_the_grace_or_of_a_file_never_released_is_409(alice, api):
    released = _committed(alice)
    attachments_release(user=alice, ids=[released.pk], now=T0)
    staged = make_attachment(alice, created_at=timezone.now(), files=False)
    discarded = make_attachment(alice, created_at=timezone.now(), lifecycle=Lifecycle.DISCARDED, files=False)
    client = api(alice)

    for attachment in (released, staged, discarded):
        response = client.post(f"/api/v1/attachments/{attachment.pk}/restore")
        assert response.status_code == 409
        assert response.json()["error"]["code"] == "NOT_RESTORABLE"
    assert _lifecycles(released, staged, discarded) == [Lifecycle.RELEASED, Lifecycle.STAGED, Lifecycle.DISCARDED]


def test_a_moderator_releases_and_restores_the_tenants_files_but_not_another_tenants(alice, mallory, moderator, api):
    alices = _committed(alice)
    mallorys = _committed(mallory)
    client = api(moderator)

    response = _release(client, {"ref": "ad:42"})

    assert response.json() == {"released": [str(alices.pk)]}
    assert _lifecycles(alices, mallorys) == [Lifecycle.RELEASED, Lifecycle.COMMITTED]
    assert client.post(f"/api/v1/attachments/{alices.pk}/restore").status_code == 204
    assert client.delete(f"/api/v1/attachments/{mallorys.pk}").status_code == 404
    assert _lifecycles(alices, mallorys) == [Lifecycle.COMMITTED, Lifecycle.COMMITTED]
    assert TransitionLog.objects.filter(attachment_id=alices.pk, transition="release").get().actor == "user:mod"


def test_the_sweeper_removes_a_released_file_only_after_the_grace(alice):
    photo = _committed(alice, created_at=T0)
    kept = _committed(alice, created_at=T0)
    used = tenant_usage(tenant=alice.membership.tenant)
    attachments_release(user=alice, ids=[photo.pk], now=T0 + DAY)
    # Still stored, so still counted, until the sweep removes it.
    assert tenant_usage(tenant=alice.membership.tenant) == used

    assert sweep_expired(now=T0 + DAY + GRACE - timedelta(seconds=1)).deleted == 0
    assert len(files_of(photo)) == 3

    report = sweep_expired(now=T0 + DAY + GRACE)

    assert report.deleted == 1 and files_of(photo) == set()
    photo.refresh_from_db()
    assert photo.lifecycle == Lifecycle.DELETED
    assert len(files_of(kept)) == 3 and _lifecycles(kept) == [Lifecycle.COMMITTED]
    after = tenant_usage(tenant=alice.membership.tenant)
    assert (after.files_used, after.bytes_used) == (used.files_used - 1, used.bytes_used - 4)
    assert TransitionLog.objects.filter(
        attachment_id=photo.pk, transition="sweep_delete", from_status="released"
    ).exists()
    with pytest.raises(Exception) as refused:
        attachment_restore(user=alice, attachment_id=photo.pk, now=T0 + DAY)
    assert getattr(refused.value, "code", None) == "NOT_RESTORABLE"


@pytest.mark.parametrize("brake", ["killswitch", "dry_run"])
def test_the_sweepers_brakes_hold_released_files_too(alice, brake):
    photo = _committed(alice, created_at=T0)
    attachments_release(user=alice, ids=[photo.pk], now=T0)
    sweeper_control_set(**{brake: True}, actor="admin:ops")

    report = sweep_expired(now=T0 + 3 * DAY)

    assert report.deleted == 0 and len(files_of(photo)) == 3
    assert _lifecycles(photo) == [Lifecycle.RELEASED]


def test_a_released_file_is_missing_to_heartbeats_and_discard_leaves_its_grace(alice, api):
    photo = _committed(alice)
    attachments_release(user=alice, ids=[photo.pk])
    photo.refresh_from_db()
    grace_end = photo.expires_at
    client = api(alice)

    heartbeat = client.post("/api/v1/attachments/heartbeat", {"ids": [str(photo.pk)]}, format="json")
    discard = client.post(f"/api/v1/attachments/{photo.pk}/discard")

    assert heartbeat.json() == {"attachments": [], "missing": [str(photo.pk)]}
    assert discard.status_code == 204
    photo.refresh_from_db()
    assert photo.lifecycle == Lifecycle.RELEASED and photo.expires_at == grace_end


def test_a_released_document_leaves_search_until_restored(alice, bob, api):
    from tests.support import pdf_bytes, run_pipeline, upload

    attachment_id = upload(
        api(alice), pdf_bytes("narwhal minutes"), profile="document", filename="m.pdf", content_type="application/pdf"
    )
    assert run_pipeline(attachment_id) == "ready"
    assert (
        api(alice)
        .post("/api/v1/attachments/commit", {"ids": [attachment_id], "ref": "ad:42"}, format="json")
        .status_code
        == 200
    )

    def found() -> list[str]:
        return [r["id"] for r in api(bob).get("/api/v1/search?q=narwhal").json()["results"]]

    assert found() == [attachment_id]
    assert api(alice).delete(f"/api/v1/attachments/{attachment_id}").status_code == 204
    assert found() == []
    assert api(alice).post(f"/api/v1/attachments/{attachment_id}/restore").status_code == 204
    assert found() == [attachment_id]


@pytest.mark.parametrize(
    "kwargs", [{}, {"ref": "ad:42", "ids": []}, {"ids": []}, {"ids": [uuid.uuid4() for _ in range(1001)]}]
)
def test_the_python_release_wants_exactly_one_of_ref_and_ids(alice, kwargs):
    from attachments.errors import ValidationFailed

    photo = _committed(alice)
    with pytest.raises(ValidationFailed):
        attachments_release(user=alice, **kwargs)
    assert _lifecycles(photo) == [Lifecycle.COMMITTED]
