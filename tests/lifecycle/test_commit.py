"""Commit: all or nothing, a reason per bad id, same-ref re-commit is a no-op, atomic under races."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone

from attachments.errors import AttachmentInvalid, ValidationFailed
from attachments.models import Attachment, Lifecycle, Status
from attachments.services.lifecycle import attachment_commit_to, attachments_commit
from tests.sweeper.support import DAY, T0, make_attachment


def _commit(client, ids, ref="listing:42"):
    return client.post("/api/v1/attachments/commit", {"ids": [str(i) for i in ids], "ref": ref}, format="json")


@pytest.mark.django_db
def test_commit_binds_every_id_and_clears_expiry(alice, api):
    now = timezone.now()
    pending = make_attachment(alice, created_at=now, status=Status.PENDING, files=False)
    ready = make_attachment(alice, created_at=now, files=False)

    response = _commit(api(alice), [pending.pk, ready.pk])

    assert response.status_code == 200
    assert response.json() == {"committed": [str(pending.pk), str(ready.pk)], "ref": "listing:42"}
    for attachment in (pending, ready):
        attachment.refresh_from_db()
        assert attachment.lifecycle == Lifecycle.COMMITTED
        assert attachment.ref == "listing:42"
        assert attachment.expires_at is None and attachment.committed_at is not None
    resource = api(alice).get(f"/api/v1/attachments/{ready.pk}").json()
    assert resource["committed"] is True and resource["expires_at"] is None and resource["ref"] == "listing:42"


@pytest.mark.django_db
def test_commit_is_all_or_nothing_with_a_reason_per_bad_id(alice, bob, mallory, api):
    now = timezone.now()
    good = make_attachment(alice, created_at=now, files=False)
    expired = make_attachment(alice, created_at=now - 8 * DAY, files=False)
    discarded = make_attachment(alice, created_at=now, lifecycle=Lifecycle.DISCARDED, expires_at=now, files=False)
    elsewhere = make_attachment(alice, created_at=now, lifecycle=Lifecycle.COMMITTED, files=False)  # ref test:1
    rejected = make_attachment(alice, created_at=now, status=Status.REJECTED, files=False)
    failed = make_attachment(alice, created_at=now, status=Status.FAILED, files=False)
    swept = make_attachment(alice, created_at=now - 20 * DAY, lifecycle=Lifecycle.DELETED, files=False)
    bobs = make_attachment(bob, created_at=now, files=False)
    mallorys = make_attachment(mallory, created_at=now, files=False)
    unknown = uuid.uuid4()

    ids = [
        good.pk,
        expired.pk,
        discarded.pk,
        elsewhere.pk,
        rejected.pk,
        failed.pk,
        swept.pk,
        bobs.pk,
        mallorys.pk,
        unknown,
        "garbage",
    ]
    response = _commit(api(alice), ids)

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "ATTACHMENT_INVALID"
    assert error["details"] == {
        str(expired.pk): "expired",
        str(discarded.pk): "discarded",
        str(elsewhere.pk): "already_committed",
        str(rejected.pk): "rejected",
        str(failed.pk): "failed",
        str(swept.pk): "expired",
        str(bobs.pk): "not_found",
        str(mallorys.pk): "not_found",
        str(unknown): "not_found",
        "garbage": "not_found",
    }
    good.refresh_from_db()
    assert good.lifecycle == Lifecycle.STAGED and good.expires_at is not None  # nothing was committed


@pytest.mark.django_db
def test_recommitting_to_the_same_ref_is_a_no_op(alice, api):
    attachment = make_attachment(alice, created_at=timezone.now(), files=False)
    assert _commit(api(alice), [attachment.pk], ref="post:1").status_code == 200
    attachment.refresh_from_db()
    first_committed_at = attachment.committed_at

    again = _commit(api(alice), [attachment.pk, attachment.pk], ref="post:1")

    assert again.status_code == 200
    assert again.json() == {"committed": [str(attachment.pk)], "ref": "post:1"}
    attachment.refresh_from_db()
    assert attachment.committed_at == first_committed_at
    other = _commit(api(alice), [attachment.pk], ref="post:2")
    assert other.status_code == 422
    assert other.json()["error"]["details"] == {str(attachment.pk): "already_committed"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [
        {"ids": ["x"]},
        {"ids": [], "ref": "a"},
        {"ids": ["x"], "ref": ""},
        {"ids": ["x"], "ref": "r" * 201},
        {"ids": ["x"], "ref": 5},
    ],
)
def test_commit_validates_its_body(alice, api, body):
    response = api(alice).post("/api/v1/attachments/commit", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"


@pytest.mark.django_db
def test_commit_at_the_expiry_boundary(alice):
    attachment = make_attachment(alice, created_at=T0, files=False)
    expiry = attachment.expires_at
    with pytest.raises(AttachmentInvalid) as exc:
        attachments_commit(owner=alice, ids=[attachment.pk], ref="r", now=expiry)
    assert exc.value.details == {str(attachment.pk): "expired"}
    assert attachments_commit(owner=alice, ids=[attachment.pk], ref="r", now=expiry - timedelta(seconds=1)) == [
        str(attachment.pk)
    ]


@pytest.mark.django_db
def test_commit_service_refuses_an_empty_or_oversized_ref(alice):
    attachment = make_attachment(alice, created_at=timezone.now(), files=False)
    for ref in ("", "x" * 201):
        with pytest.raises(ValidationFailed):
            attachments_commit(owner=alice, ids=[attachment.pk], ref=ref)
    with pytest.raises(ValidationFailed):
        attachments_commit(owner=alice, ids=[], ref="r")


@pytest.mark.django_db
def test_commit_to_a_model_instance(alice, bob):
    now = timezone.now()
    first = make_attachment(alice, created_at=now, files=False)
    second = make_attachment(alice, created_at=now, files=False)
    host = get_user_model().objects.get(pk=bob.pk)  # any model instance of the host app

    committed = attachment_commit_to(instance=host, attachments=[first, second.pk], owner=alice)

    assert committed == [str(first.pk), str(second.pk)]
    for attachment in (first, second):
        attachment.refresh_from_db()
        assert attachment.lifecycle == Lifecycle.COMMITTED
        assert attachment.ref == f"auth.user:{bob.pk}"
    # Same instance again: a no-op. Another owner's attachment: refused.
    assert attachment_commit_to(instance=host, attachments=[str(first.pk)], owner=alice) == [str(first.pk)]
    with pytest.raises(AttachmentInvalid):
        attachment_commit_to(instance=host, attachments=[first], owner=bob)


@pytest.mark.django_db
def test_commit_to_rolls_back_with_the_host_transaction(alice, bob):
    attachment = make_attachment(alice, created_at=timezone.now(), files=False)

    class HostFailure(Exception):
        pass

    with pytest.raises(HostFailure), transaction.atomic():
        attachment_commit_to(instance=bob, attachments=[attachment], owner=alice)
        raise HostFailure  # the host app's own save failed after the commit call

    attachment.refresh_from_db()
    assert attachment.lifecycle == Lifecycle.STAGED and attachment.ref is None


# --- concurrency, on real PostgreSQL ---------------------------------------------------------------


def _in_thread(barrier: threading.Barrier, fn, results: list, index: int) -> None:
    try:
        barrier.wait(timeout=10)
        results[index] = ("ok", fn())
    except Exception as exc:  # noqa: BLE001 - the test inspects whatever happened
        results[index] = ("error", exc)
    finally:
        connection.close()


def _race(*fns):
    barrier = threading.Barrier(len(fns))
    results: list = [None] * len(fns)
    threads = [threading.Thread(target=_in_thread, args=(barrier, fn, results, i)) for i, fn in enumerate(fns)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), "a commit hung (deadlock?)"
    return results


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_commits_racing_for_the_same_id_one_wins(alice):
    for round_ in range(10):
        attachment = make_attachment(alice, created_at=timezone.now(), files=False)
        pk = attachment.pk
        results = _race(
            lambda: attachments_commit(owner=alice, ids=[pk], ref=f"a:{round_}"),  # noqa: B023
            lambda: attachments_commit(owner=alice, ids=[pk], ref=f"b:{round_}"),  # noqa: B023
        )
        winners = [value for kind, value in results if kind == "ok"]
        losers = [value for kind, value in results if kind == "error"]
        assert len(winners) == 1 and len(losers) == 1, results
        assert isinstance(losers[0], AttachmentInvalid)
        assert losers[0].details == {str(attachment.pk): "already_committed"}
        attachment.refresh_from_db()
        assert attachment.lifecycle == Lifecycle.COMMITTED
        assert attachment.ref in (f"a:{round_}", f"b:{round_}")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_overlapping_commits_in_opposite_order_do_not_deadlock_and_stay_all_or_nothing(alice):
    for round_ in range(5):
        a, b, c = (make_attachment(alice, created_at=timezone.now(), files=False) for _ in range(3))
        first, second = [a.pk, b.pk], [c.pk, b.pk, a.pk]
        results = _race(
            lambda: attachments_commit(owner=alice, ids=first, ref=f"x:{round_}"),  # noqa: B023
            lambda: attachments_commit(owner=alice, ids=second, ref=f"y:{round_}"),  # noqa: B023
        )
        assert [kind for kind, _ in results].count("ok") == 1, results
        refs = dict(Attachment.objects.filter(pk__in=[a.pk, b.pk, c.pk]).values_list("pk", "ref"))
        if results[0][0] == "ok":
            assert refs == {a.pk: f"x:{round_}", b.pk: f"x:{round_}", c.pk: None}
        else:
            assert refs == {a.pk: f"y:{round_}", b.pk: f"y:{round_}", c.pk: f"y:{round_}"}
