"""avatar keeps one ready file per owner: replace, then delete; a rejected new one changes nothing."""

import pytest

from attachments.models import Attachment
from tests.support import jpeg_bytes, png_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db


def _avatar(client, data, content_type="image/jpeg"):
    return upload(client, data, profile="avatar", filename="me.jpg", content_type=content_type)


def test_new_ready_avatar_replaces_the_old_one(alice, bob, api):
    client = api(alice)
    old = _avatar(client, jpeg_bytes((100, 100)))
    assert run_pipeline(old) == "ready"
    new = _avatar(client, png_bytes((90, 90)), content_type="image/png")
    assert api(bob).get(f"/api/v1/attachments/{old}/download").status_code == 200  # until the new one is ready
    assert run_pipeline(new) == "ready"
    assert Attachment.objects.get(pk=old).lifecycle == "discarded"
    assert api(bob).get(f"/api/v1/attachments/{old}/download").status_code == 404
    assert api(bob).get(f"/api/v1/attachments/{new}/download").status_code == 200


def test_rejected_new_avatar_leaves_the_old_one(alice, api):
    client = api(alice)
    old = _avatar(client, jpeg_bytes((100, 100)))
    assert run_pipeline(old) == "ready"
    bad = _avatar(client, b"GIF89a not an allowed avatar type")
    assert run_pipeline(bad) == "rejected"
    assert Attachment.objects.get(pk=old).lifecycle == "staged"


def test_other_profiles_and_owners_are_untouched(alice, bob, api):
    mine = _avatar(api(alice), jpeg_bytes())
    image = upload(api(alice), jpeg_bytes())
    theirs = _avatar(api(bob), jpeg_bytes())
    assert {run_pipeline(i) for i in (mine, image, theirs)} == {"ready"}
    newer = _avatar(api(alice), jpeg_bytes((70, 70)))
    assert run_pipeline(newer) == "ready"
    assert Attachment.objects.get(pk=mine).lifecycle == "discarded"
    assert Attachment.objects.get(pk=image).lifecycle == "staged"
    assert Attachment.objects.get(pk=theirs).lifecycle == "staged"
