"""Every moderation action: confirmation page first, then the service, the audit trail and the effect."""

import pytest
from django.contrib.admin.models import LogEntry

from attachments.models import Attachment, DeadLetter, OutboxMessage, TransitionLog
from tests.support import client_for, jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/attachments/attachment/"


def _moderate(pk, action):
    return f"/admin/attachments/attachment/{pk}/moderate/{action}/"


def _audit(pk, transition):
    return TransitionLog.objects.filter(attachment_id=pk, transition=transition).latest("id")


def _log_entries(user, pk):
    return list(LogEntry.objects.filter(user=user, object_id=str(pk)).values_list("change_message", flat=True))


def _on_letters(client, action: str, *letters: int):
    """Run a dead-letter action, confirmed, and follow to the page that reports it."""
    return client.post(
        "/admin/attachments/deadletter/",
        {"action": action, "_selected_action": list(letters), "post": "yes"},
        follow=True,
    )


def test_take_down_confirms_then_stops_serving(moderator, alice, bob, ready_image, browser_for):
    assert client_for(bob).get(f"/api/v1/attachments/{ready_image}/download").status_code == 200
    client = browser_for(moderator)
    confirm = client.get(_moderate(ready_image, "take_down"))
    assert confirm.status_code == 200
    html = confirm.content.decode()
    assert "sunset.jpg" in html and "Yes, take down" in html and 'name="note"' in html
    assert Attachment.objects.get(pk=ready_image).status == "ready"  # nothing happens on GET

    # A takedown without a reason is refused by the form.
    again = client.post(_moderate(ready_image, "take_down"), {"post": "yes", "note": "  "})
    assert again.status_code == 200 and "Say why" in again.content.decode()
    assert Attachment.objects.get(pk=ready_image).status == "ready"

    done = client.post(_moderate(ready_image, "take_down"), {"post": "yes", "note": "copyright claim #42"})
    assert done.status_code == 302
    attachment = Attachment.objects.get(pk=ready_image)
    assert (attachment.status, attachment.reason_code, attachment.reason_message) == (
        "rejected",
        "moderator",
        "copyright claim #42",
    )
    log = _audit(ready_image, "take_down")
    assert log.actor == "staff:mod" and log.from_status == "ready"
    assert any("copyright claim #42" in m for m in _log_entries(moderator, ready_image))
    assert client_for(bob).get(f"/api/v1/attachments/{ready_image}/download").status_code == 404
    assert client_for(alice).get(f"/api/v1/attachments/{ready_image}/download").status_code == 404
    assert client_for(alice).get(f"/api/v1/attachments/{ready_image}").json()["reason"]["code"] == "moderator"


def test_restore_sends_a_takedown_back_through_the_pipeline(moderator, ready_image, browser_for):
    client = browser_for(moderator)
    client.post(_moderate(ready_image, "take_down"), {"post": "yes", "note": "mistake"})
    assert client.get(_moderate(ready_image, "restore")).status_code == 200
    before = OutboxMessage.objects.filter(actor_name="intake").count()
    assert client.post(_moderate(ready_image, "restore"), {"post": "yes"}).status_code == 302
    assert Attachment.objects.get(pk=ready_image).status == "pending"
    assert _audit(ready_image, "restore").actor == "staff:mod"
    assert OutboxMessage.objects.filter(actor_name="intake").count() == before + 1
    assert run_pipeline(ready_image) == "ready"


def test_rescan_a_ready_file_keeps_it_served(moderator, ready_image, browser_for, bob):
    from processing import actors

    client = browser_for(moderator)
    assert client.post(_moderate(ready_image, "rescan"), {"post": "yes"}).status_code == 302
    assert Attachment.objects.get(pk=ready_image).status == "ready"
    assert client_for(bob).get(f"/api/v1/attachments/{ready_image}/download").status_code == 200
    audit = _audit(ready_image, "rescan")
    assert (audit.actor, audit.from_status, audit.to_status) == ("staff:mod", "ready", "ready")
    assert _log_entries(moderator, ready_image)
    job = OutboxMessage.objects.get(actor_name="rescan", args=[str(ready_image)])
    actors.rescan.fn(*job.args)  # clean: the file was ready throughout and still is
    row = Attachment.objects.get(pk=ready_image)
    assert (row.status, row.rescan_requested_at) == ("ready", None)


def test_reprocess_a_ready_file(moderator, ready_image, browser_for):
    client = browser_for(moderator)
    assert client.post(_moderate(ready_image, "reprocess"), {"post": "yes"}).status_code == 302
    assert Attachment.objects.get(pk=ready_image).status == "pending"
    assert _audit(ready_image, "rescan").actor == "staff:mod"
    assert run_pipeline(ready_image) == "ready"


def test_requeue_a_failed_file_resolves_its_dead_letter(moderator, failed_image, browser_for):
    letter = DeadLetter.objects.get(attachment_id=failed_image)
    assert letter.resolved_at is None
    client = browser_for(moderator)
    assert client.post(_moderate(failed_image, "requeue"), {"post": "yes"}).status_code == 302
    attachment = Attachment.objects.get(pk=failed_image)
    assert attachment.status == "pending" and attachment.attempts == 0
    letter.refresh_from_db()
    assert letter.resolved_at is not None and letter.resolved_by == "staff:mod"
    assert _audit(failed_image, "retry").actor == "staff:mod"
    assert [str(failed_image)] in [m.args[:1] for m in OutboxMessage.objects.filter(actor_name="intake")]


def test_discard_marks_a_staged_file_for_the_sweeper(moderator, ready_image, browser_for):
    client = browser_for(moderator)
    assert client.post(_moderate(ready_image, "discard"), {"post": "yes"}).status_code == 302
    attachment = Attachment.objects.get(pk=ready_image)
    assert attachment.lifecycle == "discarded" and attachment.discarded_at is not None
    assert any("staff:mod" in m for m in _log_entries(moderator, ready_image))


def test_discard_refuses_a_committed_file_and_says_so(moderator, alice, ready_image, browser_for):
    assert (
        client_for(alice)
        .post("/api/v1/attachments/commit", {"ids": [ready_image], "ref": "post:1"}, format="json")
        .status_code
        == 200
    )
    response = browser_for(moderator).post(_moderate(ready_image, "discard"), {"post": "yes"}, follow=True)
    assert "ALREADY_COMMITTED" in response.content.decode()
    assert Attachment.objects.get(pk=ready_image).lifecycle == "committed"


def test_a_refused_transition_changes_nothing_and_is_reported(moderator, ready_image, browser_for):
    response = browser_for(moderator).post(_moderate(ready_image, "restore"), {"post": "yes"}, follow=True)
    assert "Restore takedown refused" in response.content.decode()
    assert Attachment.objects.get(pk=ready_image).status == "ready"
    assert not TransitionLog.objects.filter(attachment_id=ready_image, transition="restore").exists()


def test_unknown_action_is_forbidden(moderator, ready_image, browser_for):
    assert browser_for(moderator).get(_moderate(ready_image, "delete_everything")).status_code == 403


def test_bulk_take_down_goes_through_the_confirmation_page(moderator, alice, ready_image, browser_for):
    other = upload(client_for(alice), jpeg_bytes((50, 50)), filename="second.jpg")
    assert run_pipeline(other) == "ready"
    client = browser_for(moderator)
    selection = {"action": "moderate_take_down", "_selected_action": [ready_image, other]}
    confirm = client.post(CHANGELIST, selection)
    assert confirm.status_code == 200
    html = confirm.content.decode()
    assert "sunset.jpg" in html and "second.jpg" in html and 'name="post" value="yes"' in html
    assert Attachment.objects.filter(status="ready").count() == 2
    done = client.post(CHANGELIST, {**selection, "post": "yes", "note": "spam wave"})
    assert done.status_code == 302
    assert list(Attachment.objects.values_list("status", "reason_message").distinct()) == [("rejected", "spam wave")]
    assert TransitionLog.objects.filter(transition="take_down", actor="staff:mod").count() == 2


def test_dead_letter_list_detail_and_bulk_requeue(moderator, failed_image, browser_for):
    letter = DeadLetter.objects.get(attachment_id=failed_image)
    sweep = DeadLetter.objects.create(kind="sweep", attachment_id=failed_image, last_error="403 on delete")
    client = browser_for(moderator)
    listing = client.get("/admin/attachments/deadletter/?state=open").content.decode()
    assert "flaky.jpg" in listing
    detail = client.get(f"/admin/attachments/deadletter/{letter.pk}/change/").content.decode()
    assert letter.storage_key in detail
    assert "clamd: connection refused" in detail  # the error
    assert "airlock-history" in detail  # the attempt history table
    confirm = client.post(
        "/admin/attachments/deadletter/", {"action": "requeue_dead_letters", "_selected_action": [letter.pk]}
    )
    assert confirm.status_code == 200 and "Yes, requeue" in confirm.content.decode()
    client.post(
        "/admin/attachments/deadletter/",
        {"action": "requeue_dead_letters", "_selected_action": [letter.pk], "post": "yes"},
    )
    letter.refresh_from_db()
    assert letter.resolved_by == "staff:mod"
    assert Attachment.objects.get(pk=failed_image).status == "pending"
    sweep.refresh_from_db()
    assert sweep.resolved_at is None  # about deleting objects: a requeue does not answer it
    assert LogEntry.objects.filter(user=moderator, object_id=str(letter.pk)).exists()


def test_requeue_of_a_rendition_dead_letter_tries_the_rendition_again(moderator, ready_image, browser_for):
    """A video's web rendition gave up: the file stayed ready, so the requeue is the rendition's, not the file's."""
    Attachment.objects.filter(pk=ready_image).update(
        metadata={"renditions": {"web": {"status": "failed", "attempts": 2, "progress": None}}}
    )
    letter = DeadLetter.objects.create(
        kind="rendition", attachment_id=ready_image, last_error="transcode: sandbox gone", payload={"attempts": 2}
    )
    before = OutboxMessage.objects.filter(actor_name="transcode").count()
    response = _on_letters(browser_for(moderator), "requeue_dead_letters", letter.pk)
    assert "cannot requeue" not in response.content.decode()
    letter.refresh_from_db()
    assert letter.resolved_by == "staff:mod"
    row = Attachment.objects.get(pk=ready_image)
    assert row.status == "ready"  # still served meanwhile
    web = row.metadata["renditions"]["web"]
    assert (web["status"], web["attempts"]) == ("pending", 0)
    assert OutboxMessage.objects.filter(actor_name="transcode").count() == before + 1

    # Once it is no longer failed (made, or requeued already), a second requeue is refused, and says why.
    again = DeadLetter.objects.create(kind="rendition", attachment_id=ready_image, last_error="x")
    refused = _on_letters(browser_for(moderator), "requeue_dead_letters", again.pk)
    assert "rendition is not failed" in refused.content.decode()
    again.refresh_from_db()
    assert again.resolved_at is None
    assert OutboxMessage.objects.filter(actor_name="transcode").count() == before + 1


def test_dead_letter_resolve_without_requeue(moderator, failed_image, browser_for):
    letter = DeadLetter.objects.get(attachment_id=failed_image)
    client = browser_for(moderator)
    client.post(
        "/admin/attachments/deadletter/",
        {"action": "resolve_dead_letters", "_selected_action": [letter.pk], "post": "yes"},
    )
    letter.refresh_from_db()
    assert letter.resolved_at is not None and letter.resolved_by == "staff:mod"
    assert Attachment.objects.get(pk=failed_image).status == "failed"


def test_requeue_of_a_letter_without_attachment_is_refused(moderator, browser_for):
    letter = DeadLetter.objects.create(kind="message", last_error="malformed scan message", payload={"args": []})
    response = _on_letters(browser_for(moderator), "requeue_dead_letters", letter.pk)
    assert "no attachment to requeue" in response.content.decode()
    letter.refresh_from_db()
    assert letter.resolved_at is None


def test_moderator_finds_a_rejected_file_by_filter_and_search(moderator, alice, ready_image, browser_for):
    bad = upload(client_for(alice), b"definitely not a jpeg" * 10, filename="fake.jpg")
    assert run_pipeline(bad) == "rejected"
    client = browser_for(moderator)
    html = client.get(CHANGELIST, {"status__exact": "rejected"}).content.decode()
    assert "fake.jpg" in html and "sunset.jpg" not in html
    assert "type_not_allowed" in html
    for term in ("fake", str(bad), "alice"):
        assert "fake.jpg" in client.get(CHANGELIST, {"q": term}).content.decode(), term
    sha = Attachment.objects.get(pk=ready_image).sha256
    found = client.get(CHANGELIST, {"q": sha}).content.decode()
    assert "sunset.jpg" in found and "fake.jpg" not in found
    by_reason = client.get(CHANGELIST, {"reason_code": "type_not_allowed"}).content.decode()
    assert "fake.jpg" in by_reason and "sunset.jpg" not in by_reason
    committed = client.get(CHANGELIST, {"committed": "yes"}).content.decode()
    assert "fake.jpg" not in committed
    detail = client.get(f"/admin/attachments/attachment/{bad}/change/").content.decode()
    assert "type_not_allowed" in detail and "transition history" in detail.lower()


@pytest.fixture
def sweep_letter(alice, settings):
    """A sweep dead letter whose objects are all still stored."""
    from tests.sweeper.support import make_attachment

    attachment = make_attachment(alice)
    return DeadLetter.objects.create(
        kind="sweep",
        attachment=attachment,
        storage_key=attachment.storage_key,
        last_error="AccessDenied",
        payload={"keys": [attachment.storage_key]},
    )


def _letter_action(client, letter, action, **extra):
    return client.post(
        "/admin/attachments/deadletter/",
        {"action": action, "_selected_action": [letter.pk], "post": "yes", **extra},
        follow=True,
    )


def test_resolving_a_sweep_dead_letter_whose_objects_remain_is_refused(moderator, sweep_letter, browser_for):
    page = _letter_action(browser_for(moderator), sweep_letter, "resolve_dead_letters").content.decode()
    assert "still stored" in page and "abandon the objects" in page
    sweep_letter.refresh_from_db()
    assert sweep_letter.resolved_at is None


def test_the_retry_action_deletes_the_objects_and_resolves(moderator, sweep_letter, browser_for):
    from tests.sweeper.support import files_of

    client = browser_for(moderator)
    confirm = client.post(
        "/admin/attachments/deadletter/", {"action": "retry_sweep_dead_letters", "_selected_action": [sweep_letter.pk]}
    )
    assert "Retry the delete" in confirm.content.decode()
    page = _letter_action(client, sweep_letter, "retry_sweep_dead_letters").content.decode()
    assert "Retry the delete: done for 1 dead letter(s)." in page
    sweep_letter.refresh_from_db()
    assert sweep_letter.resolved_by == "staff:mod" and files_of(sweep_letter.attachment) == set()
    assert sweep_letter.attachment.lifecycle == "deleted"


def test_the_retry_action_reports_why_not_under_the_killswitch(moderator, sweep_letter, browser_for):
    from sweeper.control import sweeper_control_set

    sweeper_control_set(killswitch=True, actor="test")
    page = _letter_action(browser_for(moderator), sweep_letter, "retry_sweep_dead_letters").content.decode()
    assert "killswitch on: nothing deleted" in page
    sweep_letter.refresh_from_db()
    assert sweep_letter.resolved_at is None


def test_abandoning_the_objects_needs_a_reason_then_resolves_with_it(moderator, sweep_letter, browser_for):
    client = browser_for(moderator)
    page = _letter_action(client, sweep_letter, "abandon_sweep_objects", note="").content.decode()
    assert "Say why" in page
    sweep_letter.refresh_from_db()
    assert sweep_letter.resolved_at is None
    _letter_action(client, sweep_letter, "abandon_sweep_objects", note="vendor bucket is read-only")
    sweep_letter.refresh_from_db()
    assert sweep_letter.resolved_by == "staff:mod"
    assert sweep_letter.payload["abandoned"]["reason"] == "vendor bucket is read-only"
    assert any("vendor bucket is read-only" in m for m in _log_entries(moderator, sweep_letter.pk))
