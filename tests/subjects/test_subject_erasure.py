"""Erasure of one subject: POST /api/v1/subjects/erase and manage.py erase_subject, within the tenant only."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from attachments.errors import NotFound
from attachments.models import Attachment, ClientToken, Lifecycle, Status, TransitionLog
from attachments.retention.services.erasure import subject_erase
from attachments.retention.services.holds import attachment_hold_set
from attachments.subjects import act_for
from tests.subjects.support import as_subject
from tests.sweeper.support import files_of, make_attachment

pytestmark = pytest.mark.django_db

ERASE = "/api/v1/subjects/erase"


def _people(alice, mallory):
    """Ann's staged and committed files, Ben's, the host's own, and another tenant's `user-ann`."""
    now = timezone.now()
    return {
        "ann_staged": make_attachment(alice, created_at=now, status=Status.PENDING, subject="user-ann"),
        "ann_committed": make_attachment(alice, created_at=now, lifecycle=Lifecycle.COMMITTED, subject="user-ann"),
        "ben": make_attachment(alice, created_at=now, lifecycle=Lifecycle.COMMITTED, subject="user-ben"),
        "host": make_attachment(alice, created_at=now, lifecycle=Lifecycle.COMMITTED, subject="alice"),
        "evil_ann": make_attachment(mallory, created_at=now, lifecycle=Lifecycle.COMMITTED, subject="user-ann"),
    }


def _states() -> dict:
    return {a.pk: (a.lifecycle, a.expires_at) for a in Attachment.objects.all()}


def _client_token(user, subject: str) -> ClientToken:
    now = timezone.now()
    return ClientToken.objects.create(
        digest=subject.ljust(64, "0")[:64],
        prefix="ct_x",
        tenant=user.membership.tenant,
        user=user,
        subject=subject,
        created_at=now,
        expires_at=now + timedelta(hours=1),
    )


def test_erasing_a_subject_lets_its_files_go_and_leaves_everyone_elses(alice, mallory):
    rows = _people(alice, mallory)
    anns_token, bens_token = _client_token(alice, "user-ann"), _client_token(alice, "user-ben")
    before = _states()

    response = as_subject(alice, None).post(ERASE, {"subject": "user-ann"}, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["subject"] == "user-ann" and body["dry_run"] is False
    assert body["files"] == 2 and body["by_lifecycle"] == {"staged": 1, "committed": 1}
    assert body["tokens_revoked"] == 1 and body["held_skipped"] == []
    now = timezone.now()
    for name, lifecycle in (("ann_staged", Lifecycle.DISCARDED), ("ann_committed", Lifecycle.RELEASED)):
        row = Attachment.objects.get(pk=rows[name].pk)
        assert row.lifecycle == lifecycle and row.expires_at <= now  # due now: no grace
    after = _states()
    for name in ("ben", "host", "evil_ann"):
        assert after[rows[name].pk] == before[rows[name].pk]
    anns_token.refresh_from_db()
    bens_token.refresh_from_db()
    assert anns_token.revoked_at is not None and bens_token.revoked_at is None
    # The host's own token stays: it acts for the host's other people.
    assert as_subject(alice, None).get("/api/v1/attachments").status_code == 200
    # The audit names who erased, and what.
    entries = TransitionLog.objects.filter(transition="erase")
    assert {e.attachment_id for e in entries} == {rows["ann_staged"].pk, rows["ann_committed"].pk}
    assert {(e.actor, e.message) for e in entries} == {("user:alice", "erasure of subject acme/user-ann")}


def test_the_dry_run_reports_and_changes_nothing(alice, mallory):
    _people(alice, mallory)
    token = _client_token(alice, "user-ann")
    before, logs = _states(), TransitionLog.objects.count()

    response = as_subject(alice, None).post(ERASE, {"subject": "user-ann", "dry_run": True}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["dry_run"] is True
    assert response.json()["files"] == 2 and response.json()["tokens_revoked"] == 1
    assert response.json()["objects"] == 6  # original, served copy and thumbnail of each
    assert _states() == before and TransitionLog.objects.count() == logs
    token.refresh_from_db()
    assert token.revoked_at is None


def test_an_expired_client_token_is_neither_counted_nor_stamped_revoked(alice, mallory):
    """Only live tokens go, as logout counts them: an expired one is already useless, not revoked now."""
    _people(alice, mallory)
    live = _client_token(alice, "user-ann")
    expired = _client_token(alice, "user-ann-old")
    ClientToken.objects.filter(pk=expired.pk).update(
        subject="user-ann", expires_at=timezone.now() - timedelta(seconds=5)
    )

    dry = as_subject(alice, None).post(ERASE, {"subject": "user-ann", "dry_run": True}, format="json")
    real = as_subject(alice, None).post(ERASE, {"subject": "user-ann"}, format="json")

    assert dry.status_code == real.status_code == 200, (dry.content, real.content)
    assert dry.json()["tokens_revoked"] == real.json()["tokens_revoked"] == 1
    live.refresh_from_db()
    expired.refresh_from_db()
    assert live.revoked_at is not None and expired.revoked_at is None


def test_held_files_stay_and_are_listed(alice, mallory):
    rows = _people(alice, mallory)
    attachment_hold_set(attachment_ids=[rows["ann_committed"].pk], actor="staff:root", reason="litigation")

    response = as_subject(alice, None).post(ERASE, {"subject": "user-ann"}, format="json")

    assert response.json()["held_skipped"] == [str(rows["ann_committed"].pk)]
    assert response.json()["files"] == 1
    held = Attachment.objects.get(pk=rows["ann_committed"].pk)
    assert held.lifecycle == Lifecycle.COMMITTED and held.expires_at is None
    assert Attachment.objects.get(pk=rows["ann_staged"].pk).lifecycle == Lifecycle.DISCARDED


def test_a_request_for_one_subject_cannot_erase_another(alice, mallory):
    rows = _people(alice, mallory)
    before = _states()
    response = as_subject(alice, "user-ben").post(ERASE, {"subject": "user-ann"}, format="json")
    assert response.status_code == 404 and response.json()["error"]["code"] == "NOT_FOUND"
    assert _states() == before
    # Confined to the same subject it names, it may.
    assert as_subject(alice, "user-ann").post(ERASE, {"subject": "user-ann"}, format="json").status_code == 200
    assert Attachment.objects.get(pk=rows["ann_staged"].pk).lifecycle == Lifecycle.DISCARDED


def test_a_client_token_never_erases(alice, mallory):
    _people(alice, mallory)
    before = _states()
    act_for(alice, subject="user-ann", client_token=_client_token(alice, "user-ann"))
    with pytest.raises(NotFound):
        subject_erase(user=alice, subject="user-ann")
    assert _states() == before


def test_a_client_token_is_refused_over_http_with_its_scope_error(alice, mallory):
    from tests.subjects.test_client_tokens import device, mint

    _people(alice, mallory)
    before = _states()
    token = mint(alice, "user-ann")["token"]
    response = device(token).post(ERASE, {"subject": "user-ann"}, format="json")
    assert response.status_code == 403, response.content
    assert response.json()["error"]["code"] == "CLIENT_TOKEN_SCOPE"
    assert _states() == before


@pytest.mark.parametrize("body", [{}, {"subject": ""}, {"subject": "x" * 129}, {"subject": 7}, {"subject": " a"}])
def test_a_bad_subject_is_a_validation_error(alice, body):
    response = as_subject(alice, None).post(ERASE, body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"


def test_unauthenticated_is_401(db, api):
    assert api().post(ERASE, {"subject": "user-ann"}, format="json").status_code == 401


def _command(*args: str) -> dict:
    out = StringIO()
    call_command("erase_subject", *args, "--json", "--operator", "ops-anna", stdout=out)
    return json.loads(out.getvalue())


def test_the_command_dry_runs_then_erases_and_removes_only_that_subjects_objects(alice, mallory):
    rows = _people(alice, mallory)
    before = _states()

    dry = _command("--tenant", "acme", "user-ann", "--dry-run")
    assert dry["dry_run"] is True and dry["files"] == 2 and dry["subject"] == "subject acme/user-ann"
    assert _states() == before

    report = _command("--tenant", "acme", "user-ann")

    assert report["files"] == 2 and report["files_removed"] == 2 and report["objects_removed"] == 6
    for name in ("ann_staged", "ann_committed"):
        assert Attachment.objects.get(pk=rows[name].pk).lifecycle == Lifecycle.DELETED
        assert not files_of(rows[name])
    for name in ("ben", "host", "evil_ann"):
        assert Attachment.objects.get(pk=rows[name].pk).lifecycle == Lifecycle.COMMITTED
        assert len(files_of(rows[name])) == 3
    actor = "command:erase_subject:ops-anna"
    assert TransitionLog.objects.filter(actor=actor, transition="erase").count() == 2
    assert TransitionLog.objects.filter(actor=actor, transition="sweep_delete").count() == 2


def test_the_command_names_an_unknown_tenant(alice):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="nowhere"):
        _command("--tenant", "nowhere", "user-ann")
