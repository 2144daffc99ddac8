"""Commit with replace: the given ids become the ref's whole set, the rest is released (issue #29 item 2)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from attachments.errors import AttachmentInvalid
from attachments.models import Attachment, Lifecycle, TransitionLog
from attachments.services.lifecycle import attachments_commit
from tests.sweeper.support import make_attachment

pytestmark = pytest.mark.django_db


def _staged(owner, n: int) -> list[Attachment]:
    return [make_attachment(owner, created_at=timezone.now(), files=False) for _ in range(n)]


def _set_of(ref: str) -> set[str]:
    return {
        str(pk) for pk in Attachment.objects.filter(ref=ref, lifecycle=Lifecycle.COMMITTED).values_list("pk", flat=True)
    }


def _commit(client, ids, ref="ad:42", **extra):
    return client.post("/api/v1/attachments/commit", {"ids": [str(i) for i in ids], "ref": ref, **extra}, format="json")


def test_replace_makes_the_ids_the_refs_whole_set_and_releases_the_rest(alice, bob, api):
    photos = _staged(alice, 10)
    elsewhere = _staged(alice, 1)
    bobs = _staged(bob, 1)
    assert _commit(api(alice), [p.pk for p in photos]).status_code == 200
    assert _commit(api(alice), [elsewhere[0].pk], ref="ad:43").status_code == 200
    assert _commit(api(bob), [bobs[0].pk]).status_code == 200  # bob's files of the same ref are bob's
    kept = [p.pk for p in photos[:8]]

    response = _commit(api(alice), kept, replace=True)

    assert response.status_code == 200 and response.json() == {"committed": [str(pk) for pk in kept], "ref": "ad:42"}
    assert _set_of("ad:42") == {str(pk) for pk in kept} | {str(bobs[0].pk)}
    for dropped in photos[8:]:
        dropped.refresh_from_db()
        assert dropped.lifecycle == Lifecycle.RELEASED and dropped.expires_at > timezone.now()
        log = TransitionLog.objects.get(attachment_id=dropped.pk, transition="release")
        assert log.message == "ref ad:42 replaced" and log.actor == "user:alice"
    assert _set_of("ad:43") == {str(elsewhere[0].pk)}


def test_without_replace_a_commit_adds_to_the_set(alice, api):
    first, second = _staged(alice, 1), _staged(alice, 1)
    _commit(api(alice), [first[0].pk])
    assert _commit(api(alice), [second[0].pk]).status_code == 200
    assert _set_of("ad:42") == {str(first[0].pk), str(second[0].pk)}


def test_replace_that_fails_releases_nothing(alice, api):
    photos = _staged(alice, 3)
    _commit(api(alice), [p.pk for p in photos])
    rejected = make_attachment(alice, created_at=timezone.now(), files=False, status="rejected")

    response = _commit(api(alice), [photos[0].pk, rejected.pk], replace=True)

    assert response.status_code == 422
    assert response.json()["error"]["details"] == {str(rejected.pk): "rejected"}
    assert _set_of("ad:42") == {str(p.pk) for p in photos}


def test_a_file_released_by_an_edit_comes_back_with_the_next_edit_within_the_grace(alice, api):
    photos = _staged(alice, 3)
    _commit(api(alice), [p.pk for p in photos])
    _commit(api(alice), [photos[0].pk], replace=True)
    assert _set_of("ad:42") == {str(photos[0].pk)}

    response = _commit(api(alice), [p.pk for p in photos], replace=True)

    assert response.status_code == 200
    assert _set_of("ad:42") == {str(p.pk) for p in photos}
    photos[1].refresh_from_db()
    assert photos[1].released_at is None and photos[1].expires_at is None


def test_a_released_file_cannot_be_committed_elsewhere_or_after_the_grace(alice):
    photos = _staged(alice, 2)
    attachments_commit(owner=alice, ids=[p.pk for p in photos], ref="ad:42")
    attachments_commit(owner=alice, ids=[photos[0].pk], ref="ad:42", replace=True)

    for ref, now in (("ad:43", timezone.now()), ("ad:42", timezone.now() + timedelta(days=2))):
        with pytest.raises(AttachmentInvalid) as refused:
            attachments_commit(owner=alice, ids=[photos[1].pk], ref=ref, now=now)
        assert refused.value.details == {str(photos[1].pk): "released"}


def test_replace_on_an_empty_ref_is_a_plain_commit(alice, api):
    photos = _staged(alice, 2)
    assert _commit(api(alice), [p.pk for p in photos], replace=True).status_code == 200
    assert _set_of("ad:42") == {str(p.pk) for p in photos}


def test_replace_must_be_a_boolean(alice, api):
    photos = _staged(alice, 1)
    response = _commit(api(alice), [photos[0].pk], replace="sometimes")
    assert response.status_code == 400 and response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert _set_of("ad:42") == set()


# --- two edits of one ad at once, on real PostgreSQL ---------------------------------------------


def _race(*fns):
    barrier = threading.Barrier(len(fns))
    results: list = [None] * len(fns)

    def run(index: int, fn) -> None:
        try:
            barrier.wait(timeout=10)
            results[index] = ("ok", fn())
        except Exception as exc:  # noqa: BLE001 - the test inspects whatever happened
            results[index] = ("error", exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(fns)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), "a commit hung (deadlock?)"
    return results


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_replacing_edits_of_one_ref_at_once_leave_exactly_one_set(alice):
    for round_ in range(10):
        ref = f"ad:{round_}"
        photos = _staged(alice, 10)
        attachments_commit(owner=alice, ids=[p.pk for p in photos], ref=ref)
        edit_a = [p.pk for p in photos[:8]] + [a.pk for a in _staged(alice, 2)]  # two out, two new in
        edit_b = [p.pk for p in photos[4:]] + [b.pk for b in _staged(alice, 1)]  # four out, one new in

        results = _race(
            lambda: attachments_commit(owner=alice, ids=edit_a, ref=ref, replace=True),  # noqa: B023
            lambda: attachments_commit(owner=alice, ids=edit_b, ref=ref, replace=True),  # noqa: B023
        )

        assert [kind for kind, _ in results] == ["ok", "ok"], results
        final = _set_of(ref)
        assert final in ({str(pk) for pk in edit_a}, {str(pk) for pk in edit_b}), (round_, final)
        # Everything else the ad had or either edit named was committed by one of them and is released now.
        others = ({str(pk) for pk in edit_a} | {str(pk) for pk in edit_b} | {str(p.pk) for p in photos}) - final
        lifecycles = dict(Attachment.objects.filter(pk__in=others).values_list("pk", "lifecycle"))
        assert len(lifecycles) == len(others) and set(lifecycles.values()) == {Lifecycle.RELEASED}, lifecycles
