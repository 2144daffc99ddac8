"""Every lifecycle change is audited with its actor and shows on the attachment's admin timeline."""

import pytest

from attachments.models import TransitionLog
from sweeper.sweep import sweep_expired
from tests.support import client_for, jpeg_bytes, png_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db


def _entries(pk) -> list[tuple[str, str, str, str]]:
    return list(TransitionLog.objects.filter(attachment_id=pk).order_by("id").values_list(
        "transition", "from_status", "to_status", "actor"))


def _commit(user, *ids, ref="post:1"):
    response = client_for(user).post("/api/v1/attachments/commit", {"ids": list(ids), "ref": ref}, format="json")
    assert response.status_code == 200, response.content


def test_commit_discard_discard_all_and_sweep_delete_name_their_actor(alice):
    client = client_for(alice)
    kept, dropped, *drafts = (upload(client, jpeg_bytes()) for _ in range(4))
    _commit(alice, kept)
    assert client.post(f"/api/v1/attachments/{dropped}/discard").status_code == 204
    assert client.post("/api/v1/attachments/discard-all").json()["discarded"] == 2

    assert ("commit", "staged", "committed", "user:alice") in _entries(kept)
    assert TransitionLog.objects.get(attachment_id=kept, transition="commit").message == "ref post:1"
    assert ("discard", "staged", "discarded", "user:alice") in _entries(dropped)
    for pk in drafts:
        assert ("discard_all", "staged", "discarded", "user:alice") in _entries(pk)

    sweep_expired()
    for pk in (dropped, *drafts):
        assert ("sweep_delete", "discarded", "deleted", "system:sweep") in _entries(pk)
    assert not any(e[0] == "sweep_delete" for e in _entries(kept))


def test_replacement_is_audited_with_the_user_who_chose(alice):
    client = client_for(alice)
    old = upload(client, jpeg_bytes(), profile="avatar", filename="me.jpg")
    new = upload(client, png_bytes(), profile="avatar", filename="me.png", content_type="image/png")
    assert {run_pipeline(old), run_pipeline(new)} == {"ready"}
    _commit(alice, old)
    _commit(alice, new)
    entry = TransitionLog.objects.get(attachment_id=old, transition="replace")
    assert (entry.from_status, entry.to_status, entry.actor) == ("committed", "discarded", "user:alice")
    assert entry.message == f"replaced by {new}"


def test_staff_changes_show_on_the_timeline_with_the_staff_member(moderator, alice, ready_image, browser_for):
    staff = browser_for(moderator)
    staff.post(f"/admin/attachments/attachment/{ready_image}/moderate/take_down/", {"post": "yes", "note": "spam"})
    staff.post(f"/admin/attachments/attachment/{ready_image}/moderate/restore/", {"post": "yes"})
    staff.post(f"/admin/attachments/attachment/{ready_image}/moderate/discard/", {"post": "yes"})
    entries = _entries(ready_image)
    assert ("take_down", "ready", "rejected", "staff:mod") in entries
    assert ("restore", "rejected", "pending", "staff:mod") in entries
    assert ("discard", "staged", "discarded", "staff:mod") in entries

    page = staff.get(f"/admin/attachments/attachment/{ready_image}/change/").content.decode()
    for text in ("take_down", "restore", "discard", "staff:mod"):
        assert text in page
