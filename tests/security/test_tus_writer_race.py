"""A stalled tus writer must never write into bytes that were already scanned (issue #26, item 1).

The race as reported: PATCH A opens the staging file and its body stalls past the
claim's staleness; PATCH B takes the claim over, sends every byte, the file is
promoted to the stored object, scanned and served; A's body then resumes and its
writes land in the served file (a clean PDF turned into one with a /Launch action).
The body of A is a generator: what happens "during the stall" runs between two
of its chunks, on the same thread, so the interleaving is exact.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.errors import AirlockError
from attachments.models import Attachment, TusUpload
from attachments.storage import get_gateway
from attachments.uploads.services.tus import UploadLocked, tus_upload_append, tus_upload_create, tus_upload_recover
from tests.support import pdf_document, run_pipeline

pytestmark = pytest.mark.django_db

_PAGE = [
    b"<< /Type /Catalog /Pages 2 0 R /OpenAction 6 0 R >>",
    b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
    b"<< /Length 44 >>\nstream\nBT /F1 18 Tf 50 700 Td (Quarterly report) Tj ET\nendstream",
    b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
]
CLEAN_ACTION = b"<< /Type /Action /S /URI /URI (https://example.com/q3) >>"
LAUNCH_ACTION = b"<< /Type /Action /S /Launch /F (cmd.exe) >>".ljust(len(CLEAN_ACTION))


def _pdfs() -> tuple[bytes, bytes]:
    clean, evil = pdf_document([*_PAGE, CLEAN_ACTION]), pdf_document([*_PAGE, LAUNCH_ACTION])
    assert len(clean) == len(evil) and b"/S /Launch" in evil
    return clean, evil


def _served(attachment: Attachment) -> bytes:
    return b"".join(get_gateway().iter_chunks(attachment.served_key or attachment.working_key))


def test_the_launch_pdf_alone_is_rejected(alice):
    """The premise: uploaded normally (one PATCH), the evil PDF never becomes ready."""
    _clean, evil = _pdfs()
    upload = tus_upload_create(
        user=alice, length=len(evil), profile_name="document", filename="q3.pdf", content_type="application/pdf"
    )
    tus_upload_append(user=alice, attachment_id=upload.pk, offset=0, chunks=[evil], content_length=len(evil))
    assert run_pipeline(upload.pk) == "rejected"
    assert Attachment.objects.get(pk=upload.pk).reason_code == "malware"


def test_a_stalled_writer_cannot_swap_the_bytes_of_a_ready_file(alice):
    clean, evil = _pdfs()
    split = evil.index(LAUNCH_ACTION) - 10  # A's first chunk stops before the /Launch action
    upload = tus_upload_create(
        user=alice, length=len(evil), profile_name="document", filename="q3.pdf", content_type="application/pdf"
    )
    during_the_stall: list[object] = []

    def takeover() -> None:
        later = timezone.now() + timedelta(minutes=2)  # A's claim is long stale by the clock
        head = tus_upload_recover(user=alice, attachment_id=upload.pk, now=later)
        try:
            tus_upload_append(
                user=alice,
                attachment_id=upload.pk,
                offset=head.offset,
                chunks=[clean[head.offset :]],
                content_length=len(clean) - head.offset,
                now=later,
            )
        except AirlockError as exc:
            during_the_stall.append(exc)
            return
        during_the_stall.append(run_pipeline(upload.pk))

    def stalled_body():
        yield evil[:split]
        takeover()  # the body stalls; meanwhile a second PATCH comes
        yield evil[split:]

    try:
        tus_upload_append(
            user=alice, attachment_id=upload.pk, offset=0, chunks=stalled_body(), content_length=len(evil)
        )
    except (AirlockError, OSError):
        pass  # the unfixed code fails here, after the harm is done; the fixed one completes
    attachment = Attachment.objects.get(pk=upload.pk)
    status = run_pipeline(upload.pk) if attachment.status == "pending" else attachment.status
    attachment.refresh_from_db()
    assert TusUpload.objects.get(pk=upload.pk).state == "complete"
    if status == "ready":  # whatever won, what is served is what was scanned
        served = _served(attachment)
        assert hashlib.sha256(served).hexdigest() == attachment.sha256
        assert b"/S /Launch" not in served
    else:
        assert (status, attachment.reason_code) == ("rejected", "malware")  # A's bytes, scanned
    # While A lives, B is told to come back later (423), and nothing of it is stored.
    (outcome,) = during_the_stall
    assert isinstance(outcome, UploadLocked), outcome


def test_the_staging_fence_is_exclusive_and_never_follows_a_promoted_file(storage_root, monkeypatch):
    import os
    import uuid

    from attachments.storage import staging as staging_module
    from attachments.storage.staging import LocalStaging, StagingBusy

    staging = LocalStaging(get_gateway())
    name, key = str(uuid.uuid4()), f"tenants/acme/document/{uuid.uuid4()}"
    first = staging.fence(name, create=True)
    with pytest.raises(StagingBusy):
        staging.fence(name, create=True)  # a second writer, even in the same process
    with staging.open_at(first, 0) as fh:
        fh.write(b"scanned bytes")
    # Someone else promotes the file while a late writer waits for its lock: the late writer
    # must end up on a fresh staging file, never on the stored object.
    real_flock = staging_module.fcntl.flock
    calls = []

    def promote_meanwhile(fd, operation):
        if not calls:
            staging.promote(first, key)
            first.close()
        calls.append(fd)
        return real_flock(fd, operation)

    monkeypatch.setattr(staging_module.fcntl, "flock", promote_meanwhile)
    late = staging.fence(name, create=True)
    stored = storage_root / key
    assert len(calls) == 2 and not os.path.samestat(os.fstat(late.fd), stored.stat())
    with staging.open_at(late, 0) as fh:
        fh.write(b"unscanned")
    late.close()
    assert stored.read_bytes() == b"scanned bytes"
    again = staging.fence(name, create=False)
    try:
        with pytest.raises(OSError):  # the fence's own descriptor cannot write
            os.write(again.fd, b"x")
    finally:
        again.close()
