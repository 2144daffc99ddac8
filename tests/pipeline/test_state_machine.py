"""Every allowed and every refused transition of the status machine."""

import uuid

import pytest
from django.db import transaction
from django.utils import timezone

from attachments.models import Attachment
from attachments.services.audit import AUDIT_EVENTS
from attachments.services.transitions import TransitionConflict, apply_transition, transition_writes

pytestmark = pytest.mark.django_db

STATUSES = ["pending", "processing", "ready", "rejected", "failed"]

ALLOWED = {
    ("start", "pending"): "processing",
    ("finish", "processing"): "ready",
    ("reject", "pending"): "rejected",
    ("reject", "processing"): "rejected",
    ("fail", "processing"): "failed",
    ("retry", "processing"): "pending",
    ("retry", "failed"): "pending",
    ("take_down", "pending"): "rejected",
    ("take_down", "processing"): "rejected",
    ("take_down", "ready"): "rejected",
    ("rescan", "ready"): "pending",
    ("lose", "ready"): "failed",
    # A rescan that finds a ready file: straight down, never through pending (processing/rescan/jobs.py).
    ("reject_on_rescan", "ready"): "rejected",
}

# "restore" needs a moderator's takedown to undo; "release" a processing row.
ALLOWED[("restore", "rejected")] = "pending"
ALLOWED[("release", "processing")] = "pending"

KWARGS = {
    "start": lambda: {"lease_token": uuid.uuid4(), "lease_expires_at": timezone.now()},
    "finish": lambda: {"now": timezone.now()},
    "reject": lambda: {"code": "corrupt", "message": "bad"},
    "fail": lambda: {"message": "down"},
    "retry": dict,
    "take_down": lambda: {"message": "abuse"},
    "rescan": dict,
    "reject_on_rescan": lambda: {
        "code": "malware",
        "message": "yara: X",
        "signatures": "yara=yara:1",
        "now": timezone.now(),
    },
    "restore": dict,
    "release": dict,
    "lose": lambda: {"message": "gone"},
}


def _row(alice, status, reason_code="earlier"):
    from tests.support import client_for, create_intent

    attachment_id = create_intent(client_for(alice), size=10).json()["id"]
    # Every bookkeeping column holds something a transition would change.
    Attachment.objects.filter(pk=attachment_id).update(
        status=status,
        lease_token=uuid.uuid4(),
        lease_expires_at=timezone.now(),
        step="scan",
        attempts=2,
        reason_code=reason_code,
        reason_message="earlier",
        ready_at=timezone.now(),
    )
    return attachment_id


@pytest.mark.parametrize("name", sorted(KWARGS))
@pytest.mark.parametrize("status", STATUSES)
def test_transition_table(alice, name, status):
    attachment_id = _row(alice, status, reason_code="moderator" if name == "restore" else "earlier")
    expected = ALLOWED.get((name, status))
    with transaction.atomic():
        attachment = Attachment.objects.select_for_update().get(pk=attachment_id)
        if expected is None:
            with pytest.raises(TransitionConflict):
                apply_transition(attachment, name, actor="test", **KWARGS[name]())
            return
        apply_transition(attachment, name, actor="test", **KWARGS[name]())
    row = Attachment.objects.get(pk=attachment_id)
    assert row.status == expected
    log = row.transitions.exclude(transition__in=AUDIT_EVENTS).get()  # not the intent's entry
    assert (log.transition, log.from_status, log.to_status, log.actor) == (name, status, expected, "test")


def test_restore_only_undoes_a_moderator_takedown(alice):
    moderated = _row(alice, "rejected")
    Attachment.objects.filter(pk=moderated).update(reason_code="moderator")
    content = _row(alice, "rejected")
    Attachment.objects.filter(pk=content).update(reason_code="malware")
    with transaction.atomic():
        apply_transition(Attachment.objects.get(pk=moderated), "restore", actor="staff")
        with pytest.raises(TransitionConflict):
            apply_transition(Attachment.objects.get(pk=content), "restore", actor="staff")


def test_status_cannot_be_assigned_directly(alice):
    attachment = Attachment.objects.get(pk=_row(alice, "pending"))
    with pytest.raises(AttributeError):
        attachment.status = "ready"


@pytest.mark.parametrize(("name", "status"), sorted(ALLOWED))
def test_a_transition_declares_every_column_it_sets(alice, name, status):
    """The service saves `status` plus the declared writes: a column set but not declared would be lost."""
    attachment = Attachment.objects.get(pk=_row(alice, status, reason_code="moderator" if name == "restore" else "x"))
    before = {f.attname: getattr(attachment, f.attname) for f in Attachment._meta.concrete_fields}
    getattr(attachment, name)(**KWARGS[name]())
    changed = {attname for attname, value in before.items() if getattr(attachment, attname) != value}
    assert changed == {"status", *transition_writes(name)}
