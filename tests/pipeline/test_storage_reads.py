"""What the pipeline asks remote storage for.

Intake (which runs the scan) reads the object once, whatever the number of
scanners (each scanner still sees every byte), with one HEAD; on storage whose
upload key can be written again, it reads the snapshot's size from the HEAD that
verified it.
"""

from __future__ import annotations

import uuid

import pytest

from attachments.models import Attachment
from attachments.storage import get_gateway
from processing import pipeline
from processing import scanners as scanning
from processing.scanners import CLEAN, INFECTED, Verdict
from tests.support import jpeg_bytes, upload

pytestmark = pytest.mark.django_db


class RemoteLike:
    """The configured gateway as remote storage looks to the pipeline: no files of its own; reads and HEADs counted."""

    def __init__(self, real, *, rewritable_uploads: bool = False) -> None:
        self.real = real
        self.rewritable_uploads = rewritable_uploads  # S3 with presigned POSTs: the upload key can be written again
        self.reads: list[str] = []
        self.heads: list[str] = []

    def head(self, key):
        self.heads.append(key)
        return self.real.head(key)

    def __getattr__(self, name):
        return getattr(self.real, name)

    def local_path(self, key):
        return None

    def iter_chunks(self, key, **kwargs):
        self.reads.append(key)
        return self.real.iter_chunks(key, **kwargs)

    def read_range(self, key, *args, **kwargs):
        self.reads.append(key)
        return self.real.read_range(key, *args, **kwargs)


MARKER = b"recording-scanner-finds-this"


class Recording:
    """A second scanner that keeps what it was given, and finds MARKER wherever it is."""

    name = "recording"

    def __init__(self) -> None:
        self.seen: list[bytes] = []

    def scan(self, chunks, *, path=None):
        data = path.read_bytes() if path is not None else b"".join(chunks)
        self.seen.append(data)
        return Verdict(self.name, INFECTED, "Marker") if MARKER in data else Verdict(self.name, CLEAN, None)

    def version(self) -> str:
        return "recording=1"

    def ping(self) -> float:
        return 0.0


@pytest.fixture
def two_scanners(monkeypatch):
    recording = Recording()
    configured = scanning.scanners_from_settings
    monkeypatch.setattr(scanning, "scanners_from_settings", lambda: [*configured(), recording])
    return recording


def _scan_on_remote_storage(monkeypatch, attachment_id: str) -> tuple[str, RemoteLike]:
    """Intake, which runs the scan, on storage with no local files."""
    remote = RemoteLike(get_gateway())
    monkeypatch.setattr(pipeline, "get_gateway", lambda: remote)
    return pipeline.start_and_intake(uuid.UUID(attachment_id)), remote


def test_every_scanner_reads_one_download(alice, api, monkeypatch, two_scanners):
    data = jpeg_bytes((640, 480))
    attachment_id = upload(api(alice), data)
    outcome, remote = _scan_on_remote_storage(monkeypatch, attachment_id)
    assert outcome == "advanced"
    row = Attachment.objects.get(pk=attachment_id)
    assert remote.reads == [row.working_key]  # one GET for intake and every scanner, not one per reader
    assert remote.heads == [row.working_key]  # and one HEAD: the spool takes intake's
    assert two_scanners.seen == [data]
    assert row.step == "derive" and "recording=1" in row.scan_signatures


def test_malware_is_found_in_the_shared_download(alice, api, monkeypatch, two_scanners):
    data = jpeg_bytes((64, 48)) + MARKER  # at the end: the second scanner must have read every byte
    attachment_id = upload(api(alice), data)
    outcome, remote = _scan_on_remote_storage(monkeypatch, attachment_id)
    assert outcome == "rejected"
    row = Attachment.objects.get(pk=attachment_id)
    assert row.reason_code == "malware" and row.reason_message == "recording: Marker"
    assert len(remote.reads) == 1 and two_scanners.seen == [data]


def test_intake_heads_only_its_snapshot_once(alice, api, monkeypatch):
    data = jpeg_bytes((64, 48))
    attachment_id = upload(api(alice), data)
    upload_key = Attachment.objects.get(pk=attachment_id).storage_key
    remote = RemoteLike(get_gateway(), rewritable_uploads=True)
    monkeypatch.setattr(pipeline, "get_gateway", lambda: remote)
    assert pipeline.start_and_intake(uuid.UUID(attachment_id)) == "advanced"
    row = Attachment.objects.get(pk=attachment_id)
    assert row.content_key and row.content_key != upload_key and row.stored_size == len(data)
    # No HEAD of the upload before its copy (a missing one fails the copy) or its delete; the copy's
    # verifying HEAD gives intake its size.
    assert remote.heads == [row.content_key]


def test_a_file_not_the_size_it_declared_is_rejected_unread(alice, api, monkeypatch):
    data = jpeg_bytes((64, 48))
    attachment_id = upload(api(alice), data)
    Attachment.objects.filter(pk=attachment_id).update(declared_size=len(data) + 1)  # a store that cannot bound a body
    outcome, remote = _scan_on_remote_storage(monkeypatch, attachment_id)
    assert outcome == "rejected"
    assert Attachment.objects.get(pk=attachment_id).reason_code == "size_mismatch"
    assert remote.reads == []  # judged from its size alone


def test_a_file_over_its_profiles_limit_is_rejected_unread(alice, api, monkeypatch):
    from dataclasses import replace

    data = jpeg_bytes((64, 48))
    attachment_id = upload(api(alice), data)
    real = pipeline.get_profile
    monkeypatch.setattr(pipeline, "get_profile", lambda name: replace(real(name), max_bytes=len(data) - 1))
    outcome, remote = _scan_on_remote_storage(monkeypatch, attachment_id)
    assert outcome == "rejected"
    assert Attachment.objects.get(pk=attachment_id).reason_code == "too_large"
    assert remote.reads == []
