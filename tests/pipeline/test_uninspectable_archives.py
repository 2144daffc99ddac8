"""A ZIP entry the sandbox cannot inflate is rejected by default; the setting lets it through, counted."""

import io
import zipfile

import pytest

from attachments.models import Attachment
from tests.sandbox.helpers import zip_patched
from tests.support import run_pipeline, upload

pytestmark = pytest.mark.django_db


def _imploded_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("lorem.txt", b"lorem ipsum " * 100)
    return zip_patched(buf.getvalue(), method=6)  # PKWARE implode in both headers: nothing here inflates it


def _upload(api, alice):
    return upload(api(alice), _imploded_zip(), filename="implode.zip", profile="archive", content_type="application/zip")


def test_rejected_by_default(alice, api):
    attachment_id = _upload(api, alice)
    assert run_pipeline(attachment_id) == "rejected"
    row = Attachment.objects.get(pk=attachment_id)
    assert row.reason_code == "archive_uninspectable" and "'lorem.txt'" in row.reason_message


def test_the_setting_lets_it_through_unscanned(alice, api, settings):
    settings.AIRLOCK_ZIP_ALLOW_UNINSPECTABLE = True
    attachment_id = _upload(api, alice)
    assert run_pipeline(attachment_id) == "ready"
    assert Attachment.objects.get(pk=attachment_id).metadata["unscanned_entries"] == 1
