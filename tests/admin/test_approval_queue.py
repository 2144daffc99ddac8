"""The console's approval queue: one link's or one ref's waiting files, decided on many at once, audited.

A moderator sees only their tenant's waiting files of the link or ref; approving commits
them to the link's ref, declining discards them (after a confirmation); each decision is a
timeline row with the staff member as the actor. Another tenant's moderator sees none of it.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.core.management import call_command
from django.utils import timezone

from attachments.models import Approval, Attachment, Lifecycle, TransitionLog, UploadLink
from tests.corpus import corpus_dir
from tests.support import client_for, jpeg_bytes, make_staff, run_pipeline, upload

pytestmark = pytest.mark.django_db

QUEUE = "/admin/attachments/attachment/approval/"
REF = "wedding:anna-ben"


def _link(owner, *, ref: str = REF, title: str = "Anna & Ben", requires_approval: bool = True) -> UploadLink:
    now = timezone.now()
    return UploadLink.objects.create(
        tenant_id=owner.membership.tenant_id,
        user=owner,
        ref=ref,
        title=title,
        requires_approval=requires_approval,
        created_at=now,
        expires_at=now + timedelta(days=7),
    )


def _sent(link: UploadLink, data: bytes, *, filename: str, profile: str = "image", content_type: str = "image/jpeg"):
    """A guest's file through `link`, processed: ready and, when the link asks for it, waiting for approval."""
    pk = upload(client_for(link.user), data, profile=profile, filename=filename, content_type=content_type)
    approval = Approval.PENDING if link.requires_approval else Approval.NOT_REQUIRED
    Attachment.objects.filter(pk=pk).update(upload_link=link, approval=approval, subject="guest-1")
    assert run_pipeline(pk) == "ready"
    return pk


@pytest.fixture
def queue(make_user):
    """acme's wedding link with two photos and a video waiting (and one approved), a second acme link of the
    same ref with one waiting, another acme ref, and globex's link of the same ref name with one waiting."""
    alice = make_user("alice", tenant="acme")
    gina = make_user("gina", tenant="globex")
    wedding, more, party = _link(alice), _link(alice, title="Second table"), _link(alice, ref="party:1")
    video = (corpus_dir() / "generated" / "video_h264_aac.mp4").read_bytes()
    made = {
        "link": wedding,
        "more_link": more,
        "globex_link": _link(gina, title="Globex wedding"),
        "photo1": _sent(wedding, jpeg_bytes((320, 240)), filename="first-dance.jpg"),
        "photo2": _sent(wedding, jpeg_bytes((240, 320), color=(20, 90, 200)), filename="cake.jpg"),
        "video": _sent(wedding, video, filename="toast.mp4", profile="media", content_type="video/mp4"),
        "approved": _sent(wedding, jpeg_bytes((64, 48)), filename="already-approved.jpg"),
        "more": _sent(more, jpeg_bytes((64, 64)), filename="table-two.jpg"),
        "party": _sent(party, jpeg_bytes((50, 50)), filename="party.jpg"),
    }
    made["globex"] = _sent(made["globex_link"], jpeg_bytes((80, 60)), filename="globex-guest.jpg")
    Attachment.objects.filter(pk=made["approved"]).update(approval=Approval.APPROVED)
    return made


@pytest.fixture
def globex_mod(queue):
    call_command("createuser", "globex-mod", "--tenant", "globex", "--moderator", "--password", "pw-globex-mod")
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username="globex-mod")


def _tiles(response) -> list[str]:
    assert response.status_code == 200, response.status_code
    return re.findall(r'class="airlock-tile" data-id="([0-9a-f-]+)"', response.content.decode())


def _ids(*pks) -> list[str]:
    return sorted(str(pk) for pk in pks)


def test_a_links_queue_shows_its_waiting_files_with_thumbnails_and_posters(queue, acme_mod, browser_for):
    client = browser_for(acme_mod)
    response = client.get(QUEUE, {"link": str(queue["link"].pk)})
    # Oldest first; the approved file and the other link's or ref's files are not in it.
    assert _tiles(response) == [str(queue["photo1"]), str(queue["photo2"]), str(queue["video"])]
    page = response.content.decode()
    assert f"/admin/attachments/attachment/{queue['photo1']}/thumbnail/" in page
    # A video shows its frame (the sandbox's thumbnail of its poster) with a play mark and its duration.
    video_tile = page[page.index(f'data-id="{queue["video"]}"') :]
    video_tile = video_tile[: video_tile.index("</li>")]
    assert f'<img src="/admin/attachments/attachment/{queue["video"]}/thumbnail/"' in video_tile
    assert re.search(r'class="airlock-tile-badge">&#9654; 0:0\d<', video_tile), video_tile
    assert 'id="airlock-waiting">3<' in page
    for pk in (queue["photo1"], queue["video"]):
        assert client.get(f"/admin/attachments/attachment/{pk}/thumbnail/")["Content-Type"] == "image/webp"


def test_a_refs_queue_gathers_every_link_of_the_ref_in_the_moderators_tenant(queue, acme_mod, browser_for):
    tiles = _tiles(browser_for(acme_mod).get(QUEUE, {"ref": REF}))
    assert sorted(tiles) == _ids(queue["photo1"], queue["photo2"], queue["video"], queue["more"])
    assert str(queue["globex"]) not in tiles  # the same ref name in another tenant is another ref


def test_another_tenants_moderator_sees_nothing_of_it(queue, globex_mod, browser_for):
    client = browser_for(globex_mod)
    assert client.get(QUEUE, {"link": str(queue["link"].pk)}).status_code == 404
    assert _tiles(client.get(QUEUE, {"ref": REF})) == [str(queue["globex"])]
    index = client.get(QUEUE).content.decode()
    assert "Globex wedding" in index and "Anna &amp; Ben" not in index
    links = client.get("/admin/attachments/uploadlink/").content.decode()
    assert "Globex wedding" in links and "Anna &amp; Ben" not in links


def test_approve_many_commits_them_and_audits_the_staff_member(queue, acme_mod, browser_for):
    client = browser_for(acme_mod)
    url = f"{QUEUE}?link={queue['link'].pk}"
    response = client.post(url, {"decision": "approve", "ids": [queue["photo1"], queue["photo2"]]}, follow=True)
    assert "Approved 2 file(s)." in response.content.decode()
    assert _tiles(response) == [str(queue["video"])]
    for pk in (queue["photo1"], queue["photo2"]):
        row = Attachment.objects.get(pk=pk)
        assert (row.approval, row.lifecycle, row.ref) == (Approval.APPROVED, Lifecycle.COMMITTED, REF)
        events = list(TransitionLog.objects.filter(attachment_id=pk).order_by("pk").values_list("transition", "actor"))
        assert events[-2:] == [("approve", "staff:acme-mod"), ("commit", "staff:acme-mod")]
        assert LogEntry.objects.filter(object_id=str(pk), change_message="Approved by staff:acme-mod").exists()
    # The change page's timeline shows the decision and who made it.
    change = client.get(f"/admin/attachments/attachment/{queue['photo1']}/change/").content.decode()
    assert re.search(r"<td>approve</td><td>pending → approved</td><td>staff:acme-mod</td>", change), change
    # A stale page approving them again changes nothing and says so.
    again = client.post(url, {"decision": "approve", "ids": [queue["photo1"]]}, follow=True).content.decode()
    assert "1 file(s) were no longer waiting" in again


def test_decline_asks_first_then_discards_and_audits(queue, acme_mod, browser_for):
    client = browser_for(acme_mod)
    url = f"{QUEUE}?link={queue['link'].pk}"
    confirm = client.post(url, {"decision": "decline", "ids": [queue["video"]]})
    assert confirm.status_code == 200 and 'id="airlock-decline-confirm"' in confirm.content.decode()
    assert Attachment.objects.get(pk=queue["video"]).approval == Approval.PENDING  # nothing yet
    done = client.post(url, {"decision": "decline", "ids": [queue["video"]], "confirm": "yes"}, follow=True)
    assert "Declined 1 file(s)." in done.content.decode()
    row = Attachment.objects.get(pk=queue["video"])
    assert (row.approval, row.lifecycle) == (Approval.DECLINED, Lifecycle.DISCARDED)
    assert TransitionLog.objects.filter(
        attachment_id=row.pk, transition="decline", to_status=Approval.DECLINED, actor="staff:acme-mod"
    ).exists()
    assert _tiles(done) == [str(queue["photo1"]), str(queue["photo2"])]


def test_a_selection_reaching_another_tenant_is_refused_whole(queue, acme_mod, globex_mod, browser_for):
    response = browser_for(acme_mod).post(
        f"{QUEUE}?ref={REF}", {"decision": "approve", "ids": [queue["photo1"], queue["globex"]]}, follow=True
    )
    assert "not yours to moderate: nothing was done" in response.content.decode()
    assert Attachment.objects.get(pk=queue["photo1"]).approval == Approval.PENDING
    assert Attachment.objects.get(pk=queue["globex"]).approval == Approval.PENDING
    # Nor may the other tenant's moderator decide on acme's files.
    browser_for(globex_mod).post(
        f"{QUEUE}?ref={REF}", {"decision": "decline", "ids": [queue["photo1"]], "confirm": "yes"}
    )
    assert Attachment.objects.get(pk=queue["photo1"]).approval == Approval.PENDING


def test_platform_staff_decide_across_tenants_as_themselves(queue, browser_for):
    ops = make_staff("ops-mod", "--platform")
    client = browser_for(ops)
    assert sorted(_tiles(client.get(QUEUE, {"ref": REF}))) == _ids(
        queue["photo1"], queue["photo2"], queue["video"], queue["more"], queue["globex"]
    )
    client.post(f"{QUEUE}?ref={REF}", {"decision": "approve", "ids": [queue["globex"], queue["more"]]})
    for pk in (queue["globex"], queue["more"]):
        assert Attachment.objects.get(pk=pk).approval == Approval.APPROVED
        assert TransitionLog.objects.filter(attachment_id=pk, transition="approve", actor="staff:ops-mod").exists()


def test_staff_who_may_only_look_see_the_queue_but_cannot_decide(queue, viewer, browser_for):
    client = browser_for(viewer)
    page = client.get(QUEUE, {"link": str(queue["link"].pk)}).content.decode()
    assert "first-dance.jpg" in page and 'name="ids"' not in page and 'id="airlock-approve"' not in page
    assert (
        client.post(f"{QUEUE}?link={queue['link'].pk}", {"decision": "approve", "ids": [queue["photo1"]]}).status_code
        == 403
    )
    assert Attachment.objects.get(pk=queue["photo1"]).approval == Approval.PENDING


def test_the_queues_are_reachable_from_the_admin(queue, acme_mod, browser_for):
    client = browser_for(acme_mod)
    assert 'id="airlock-approval-link"' in client.get("/admin/").content.decode()
    index = client.get(QUEUE).content.decode()
    assert f"?link={queue['link'].pk}" in index and "?ref=wedding%3Aanna-ben" in index
    # The upload links' list: each link's waiting files, linked to its queue.
    links = client.get("/admin/attachments/uploadlink/").content.decode()
    assert re.search(rf'href="{QUEUE}\?link={queue["link"].pk}" data-waiting="3">3 waiting', links), links
    assert 'data-waiting="1">1 waiting' in links  # the second table's link
    link_page = client.get(f"/admin/attachments/uploadlink/{queue['link'].pk}/change/").content.decode()
    assert 'data-waiting="3">3 waiting' in link_page and f'src="/l/{queue["link"].pk}/qr.svg"' in link_page
    other = client.get(f"/admin/attachments/uploadlink/{queue['globex_link'].pk}/change/", follow=True)
    assert "Globex wedding" not in other.content.decode()  # another tenant's link: the admin's "no such object"
    # The attachment list filters by approval, and asks the saved question.
    listed = client.get("/admin/attachments/attachment/", {"approval__exact": "pending"}).content.decode()
    assert "first-dance.jpg" in listed and "already-approved.jpg" not in listed and "awaiting approval" in listed
    asked = client.get("/admin/attachments/attachment/", {"question": "awaiting_approval"}).content.decode()
    assert "table-two.jpg" in asked and "already-approved.jpg" not in asked and "globex-guest.jpg" not in asked
    # The change page says where the file stands and links to its queue.
    change = client.get(f"/admin/attachments/attachment/{queue['photo1']}/change/").content.decode()
    assert "waiting for the host&#x27;s approval" in change
    assert f'class="airlock-approval-queue" href="{QUEUE}?link={queue["link"].pk}"' in change


def test_the_grid_reads_the_same_statements_however_many_files_wait(
    queue, acme_mod, browser_for, django_assert_num_queries
):
    client = browser_for(acme_mod)
    client.get(QUEUE, {"ref": REF})  # the first request of a session reads more (its permissions' cache)
    # Six for the session, the user, their permissions, groups and tenant; the count; one for the page of files
    # with their tenant and whether each has a thumbnail or poster.
    with django_assert_num_queries(8):
        assert len(_tiles(client.get(QUEUE, {"ref": REF}))) == 4
    for n in range(3):
        _sent(queue["more_link"], jpeg_bytes((40 + n, 40)), filename=f"late-{n}.jpg")
    with django_assert_num_queries(8):
        assert len(_tiles(client.get(QUEUE, {"ref": REF}))) == 7


def test_bad_input_gets_an_answer_not_an_error(queue, acme_mod, browser_for):
    client = browser_for(acme_mod)
    assert client.get(QUEUE, {"link": "not-a-link"}).status_code == 404
    assert client.get(QUEUE, {"ref": "x" * 201}).status_code == 404
    assert _tiles(client.get(QUEUE, {"ref": REF, "p": "nine"})) != []  # an unknown page is the first one
    url = f"{QUEUE}?link={queue['link'].pk}"
    empty = client.post(url, {"decision": "approve"}, follow=True).content.decode()
    assert "Select at least one file first." in empty
    unknown = client.post(url, {"decision": "publish", "ids": [queue["photo1"]]}, follow=True).content.decode()
    assert "Choose Approve or Decline." in unknown
    garbage = client.post(url, {"decision": "approve", "ids": ["nope", queue["photo1"]]}, follow=True)
    assert "not yours to moderate: nothing was done" in garbage.content.decode()
    assert Attachment.objects.get(pk=queue["photo1"]).approval == Approval.PENDING
    assert client.post(QUEUE, {"decision": "approve", "ids": [queue["photo1"]]}).status_code == 404  # no queue named


def test_deciding_on_more_files_takes_no_more_statements(queue, acme_mod, browser_for):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = browser_for(acme_mod)
    url = f"{QUEUE}?ref={REF}"
    # The session's permissions and the admin log's content type are cached after a first decision.
    client.post(url, {"decision": "approve", "ids": [queue["photo1"]]})
    counts = []
    for ids in ([queue["photo2"]], [queue["video"], queue["more"]]):
        with CaptureQueriesContext(connection) as captured:
            assert client.post(url, {"decision": "approve", "ids": ids}).status_code == 302
        counts.append(len(captured.captured_queries))
        assert all(Attachment.objects.get(pk=pk).approval == Approval.APPROVED for pk in ids)
    assert counts[0] == counts[1], counts
