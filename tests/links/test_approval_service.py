"""Approve and decline guests' files: who may, what changes, what is audited and announced."""

from __future__ import annotations

import pytest

from attachments.links.services.approval import attachments_approve, attachments_decline
from attachments.models import Approval, Attachment, Lifecycle, TransitionLog
from tests.support import run_pipeline

pytestmark = pytest.mark.django_db


def _row(pk) -> Attachment:
    return Attachment.objects.get(pk=pk)


def test_a_ready_file_waits_for_approval_then_is_committed_to_the_links_ref(alice, make_link, link_file):
    link = make_link(requires_approval=True)
    pk = link_file(link)
    assert run_pipeline(pk) == "ready"
    row = _row(pk)
    assert (row.lifecycle, row.approval, row.ref) == (Lifecycle.STAGED, Approval.PENDING, None)

    assert attachments_approve(user=alice, ids=[pk], actor="user:host") == [pk]
    row = _row(pk)
    assert (row.lifecycle, row.approval, row.ref) == (Lifecycle.COMMITTED, Approval.APPROVED, "event:1")
    events = list(TransitionLog.objects.filter(attachment_id=pk).values_list("transition", "actor").order_by("pk"))
    assert events[-2:] == [("approve", "user:host"), ("commit", "user:host")]
    # Only pending files change: approving again changes nothing.
    assert attachments_approve(user=alice, ids=[pk]) == []


def test_a_file_approved_before_it_is_ready_is_committed_when_it_becomes_ready(alice, make_link, link_file):
    link = make_link(requires_approval=True, ref="event:2")
    pk = link_file(link)
    assert attachments_approve(user=alice, ref="event:2") == [pk]
    assert _row(pk).lifecycle == Lifecycle.STAGED
    assert run_pipeline(pk) == "ready"
    row = _row(pk)
    assert (row.lifecycle, row.ref) == (Lifecycle.COMMITTED, "event:2")


def test_a_link_file_without_approval_is_committed_once_ready(make_link, link_file):
    pk = link_file(make_link())
    assert _row(pk).lifecycle == Lifecycle.STAGED
    assert run_pipeline(pk) == "ready"
    row = _row(pk)
    assert (row.lifecycle, row.ref, row.approval) == (Lifecycle.COMMITTED, "event:1", Approval.NOT_REQUIRED)


def test_decline_by_ref_discards_every_pending_file(alice, make_link, link_file):
    link = make_link(requires_approval=True)
    first, second = link_file(link), link_file(link)
    run_pipeline(first)
    assert sorted(attachments_decline(user=alice, ref="event:1")) == sorted([first, second])
    for pk in (first, second):
        row = _row(pk)
        assert (row.lifecycle, row.approval) == (Lifecycle.DISCARDED, Approval.DECLINED)
        assert row.expires_at is not None  # due for the sweeper
    # A declined file is never committed when it becomes ready.
    run_pipeline(second)
    assert _row(second).lifecycle == Lifecycle.DISCARDED


def test_a_host_cannot_commit_a_file_that_waits_for_approval(alice, make_link, link_file):
    from attachments.errors import AttachmentInvalid
    from attachments.services.lifecycle import attachments_commit

    pk = link_file(make_link(requires_approval=True))
    assert run_pipeline(pk) == "ready"
    with pytest.raises(AttachmentInvalid) as refused:
        attachments_commit(owner=alice, ids=[pk], ref="event:1")
    assert refused.value.details == {pk: "pending_approval"}
    assert (_row(pk).lifecycle, _row(pk).ref) == (Lifecycle.STAGED, None)
    assert attachments_approve(user=alice, ids=[pk]) == [pk]
    assert _row(pk).lifecycle == Lifecycle.COMMITTED


def test_a_committed_pending_file_is_released_when_declined(alice, make_link, link_file):
    pk = link_file(make_link(requires_approval=True))
    run_pipeline(pk)
    # Committed before commits checked approval: such a row may exist.
    Attachment.objects.filter(pk=pk).update(lifecycle=Lifecycle.COMMITTED, ref="event:1", expires_at=None)
    assert attachments_decline(user=alice, ids=[pk]) == [pk]
    assert _row(pk).lifecycle == Lifecycle.RELEASED


def test_only_the_owner_or_a_moderator_of_the_tenant_may_decide(alice, bob, mallory, make_link, link_file):
    from tests.support import make_staff

    pk = link_file(make_link(requires_approval=True))
    assert attachments_approve(user=bob, ids=[pk]) == []  # another account of the tenant, not a moderator
    assert attachments_decline(user=mallory, ids=[pk]) == []  # another tenant
    assert _row(pk).approval == Approval.PENDING
    moderator = make_staff("mod")
    assert attachments_approve(user=moderator, ids=[pk]) == [pk]


@pytest.mark.parametrize("given", [{}, {"ids": ["x"], "ref": "event:1"}, {"ids": []}, {"ref": ""}])
def test_exactly_one_of_ids_and_ref(alice, given):
    from attachments.errors import ValidationFailed

    with pytest.raises(ValidationFailed):
        attachments_approve(user=alice, **given)


def test_decisions_are_announced_as_webhook_events(alice, make_link, link_file):
    from webhooks.models import WebhookEndpoint, WebhookEvent
    from webhooks.services.endpoints import forget

    WebhookEndpoint.objects.create(tenant_id=alice.membership.tenant_id, url="https://hooks.example/x")
    forget()
    link = make_link(requires_approval=True)
    yes, no = link_file(link), link_file(link)
    attachments_approve(user=alice, ids=[yes])
    attachments_decline(user=alice, ids=[no])
    assert set(WebhookEvent.objects.filter(attachment_id=yes).values_list("type", flat=True)) >= {"attachment.approved"}
    assert "attachment.declined" in set(WebhookEvent.objects.filter(attachment_id=no).values_list("type", flat=True))
    assert "attachment.approved" not in set(
        WebhookEvent.objects.filter(attachment_id=no).values_list("type", flat=True)
    )


def test_a_ready_event_of_a_file_waiting_for_approval_offers_its_owner_previews_only(alice, make_link, link_file):
    """The event body is the resource as its owner reads it: the full-size download waits for approval."""
    import json

    from webhooks.models import WebhookEndpoint, WebhookEvent
    from webhooks.services.endpoints import forget

    WebhookEndpoint.objects.create(tenant_id=alice.membership.tenant_id, url="https://hooks.example/x")
    forget()
    pk = link_file(make_link(requires_approval=True))
    assert run_pipeline(pk) == "ready"
    ready = json.loads(WebhookEvent.objects.get(attachment_id=pk, type="attachment.ready").body)["data"]
    assert ready["approval"] == "pending" and ready["available"] is False
    assert "download" not in ready["links"] and "thumbnail" in ready["links"]

    attachments_approve(user=alice, ids=[pk])
    committed = json.loads(WebhookEvent.objects.get(attachment_id=pk, type="attachment.committed").body)["data"]
    assert committed["available"] is True and "download" in committed["links"]
