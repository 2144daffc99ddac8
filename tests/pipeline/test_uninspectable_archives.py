"""A ZIP entry the sandbox cannot inflate is rejected by default; the setting lets it through, counted."""

import io
import zipfile

import pytest

from attachments.models import Attachment
from tests.corpus import corpus_dir
from tests.sandbox.helpers import zip_patched
from tests.support import run_pipeline, upload

pytestmark = pytest.mark.django_db


def _imploded_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("lorem.txt", b"lorem ipsum " * 100)
    return zip_patched(buf.getvalue(), method=6)  # PKWARE implode in both headers: nothing here inflates it


def _upload(api, alice):
    return upload(
        api(alice), _imploded_zip(), filename="implode.zip", profile="archive", content_type="application/zip"
    )


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


DIFFERENTIAL = {
    "zip_stored_over_deflate.zip": "its local header says compression method 8, its central directory record 0",
    "zip_local_entry_unlisted.zip": "belong to no entry of the central directory",
    "zip_concatenated.zip": "does not end where the end record begins",
}


@pytest.mark.parametrize("name", DIFFERENTIAL)
def test_zips_other_extractors_read_differently_are_rejected(alice, api, settings, name):
    data = (corpus_dir() / "generated" / name).read_bytes()
    attachment_id = upload(api(alice), data, filename=name, profile="archive", content_type="application/zip")
    assert run_pipeline(attachment_id) == "rejected"
    row = Attachment.objects.get(pk=attachment_id)
    if settings.CLAMD_SOCKET or settings.CLAMD_HOST:
        # ClamAV reads local headers too: it may name the EICAR member before the sandbox runs.
        assert row.reason_code in {"archive_uninspectable", "malware"}, row.reason_message
    if row.reason_code == "archive_uninspectable" or not (settings.CLAMD_SOCKET or settings.CLAMD_HOST):
        assert row.reason_code == "archive_uninspectable" and DIFFERENTIAL[name] in row.reason_message


def test_deflate64_members_are_inflated_and_scanned(alice, api):
    benign = (corpus_dir() / "generated" / "zip_deflate64.zip").read_bytes()
    attachment_id = upload(api(alice), benign, filename="folder.zip", profile="archive", content_type="application/zip")
    assert run_pipeline(attachment_id) == "ready"
    metadata = Attachment.objects.get(pk=attachment_id).metadata
    assert "unscanned_entries" not in metadata and metadata["entries"] == 3
    eicar = (corpus_dir() / "generated" / "eicar_in_deflate64_zip.zip").read_bytes()
    attachment_id = upload(api(alice), eicar, filename="tools.zip", profile="archive", content_type="application/zip")
    assert run_pipeline(attachment_id) == "rejected"
    assert Attachment.objects.get(pk=attachment_id).reason_code == "malware"
