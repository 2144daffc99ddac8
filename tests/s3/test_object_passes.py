"""How often an uploaded object crosses the wire between S3 (moto server) and the worker, and in what pieces.

A 1 GiB video used to be copied server-side into a snapshot, downloaded once per
scanner and once more for derive, and its remux uploaded with boto3's defaults
(8 MiB parts read into memory, ten at a time). These pin what is left: one
download, no copy of an upload the server assembled itself, and the server's
uploads cut at AIRLOCK_S3_TRANSFER_CHUNK_BYTES and read from the file as sent.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import requests

from attachments.models import Attachment
from tests.s3.support import intent, mp4_bytes, send_parts, send_upload
from tests.support import run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]

MIB = 1024 * 1024


@pytest.fixture
def s3_calls(s3) -> Iterator[list[tuple[str, dict]]]:
    """Every S3 operation the gateway's client sends, with its parameters, while the test runs."""
    from attachments.storage import get_gateway

    calls: list[tuple[str, dict]] = []

    def record(params, model, **_kwargs):
        calls.append((model.name, dict(params)))

    events = get_gateway().client.meta.events
    events.register("before-parameter-build.s3", record, unique_id="test-object-passes")
    yield calls
    events.unregister("before-parameter-build.s3", unique_id="test-object-passes")


def _full_reads(calls: list[tuple[str, dict]], key: str) -> int:
    """GETs of the whole object (the sniff's ranged read of its first bytes is not one)."""
    return sum(1 for op, params in calls if op == "GetObject" and params.get("Key") == key and "Range" not in params)


def _copies(calls: list[tuple[str, dict]]) -> list[str]:
    return [op for op, _ in calls if op in ("CopyObject", "UploadPartCopy")]


def _multipart_upload(client, data: bytes, *, sha256: str = "") -> tuple[dict, Attachment]:
    response = client.post(
        "/api/v1/uploads",
        {
            "profile": "media",
            "filename": "clip.mp4",
            "size": len(data),
            "content_type": "video/mp4",
            **({"sha256": sha256} if sha256 else {}),
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    created = response.json()
    upload = created["upload"]
    etags = send_parts(upload, data)
    assert client.post(upload["complete_url"], {"parts": etags}, format="json").status_code == 202
    return upload, Attachment.objects.get(pk=created["id"])


def test_a_multipart_upload_is_read_in_place_and_downloaded_once(multipart, alice, api, s3_calls):
    data = mp4_bytes(11 * MIB)
    upload, row = _multipart_upload(api(alice), data)
    assert row.upload_sealed and row.multipart_upload_id is None
    # The premise: once assembled, the part URLs the client holds write nothing.
    replay = requests.put(upload["parts"][0]["url"], data=b"x" * (5 * MIB), timeout=60)
    # (S3 answers 404 NoSuchUpload; moto a 500 from its KeyError: refused either way.)
    assert replay.status_code in (404, 500) and multipart.get(row.storage_key) == data

    assert run_pipeline(row.pk) == "ready"
    row.refresh_from_db()
    assert _copies(s3_calls) == []  # no snapshot: the assembled key is the server-only key
    assert row.content_key == "" and row.working_key == row.storage_key
    assert multipart.get(row.storage_key) == data
    assert not multipart.exists(f"tenants/acme/derivatives/{row.pk}/original.bin")
    # Scanned (by every configured scanner) and decoded from one download.
    assert _full_reads(s3_calls, row.storage_key) == 1


def test_a_declared_digest_is_checked_over_the_same_one_download(multipart, alice, api, s3_calls):
    import hashlib

    data = mp4_bytes(11 * MIB)
    _upload, row = _multipart_upload(api(alice), data, sha256=hashlib.sha256(data).hexdigest())
    assert run_pipeline(row.pk) == "ready"
    row.refresh_from_db()
    assert _full_reads(s3_calls, row.working_key) == 1  # intake's digest, the scanners, derive


def test_a_presigned_post_is_still_snapshotted_and_the_snapshot_downloaded_once(s3, alice, api, s3_calls):
    from attachments.uploads.services.uploads import object_arrived

    data = mp4_bytes(2 * MIB)
    created = intent(api(alice), data, profile="media", filename="clip.mp4", content_type="video/mp4")
    assert created["upload"]["method"] == "POST"
    assert send_upload(created["upload"], data).status_code in (200, 201, 204)
    row = Attachment.objects.get(pk=created["id"])
    object_arrived(
        key=row.storage_key, size=len(data), source="webhook", dedupe_key="k", event_name="ObjectCreated:Post"
    )
    assert run_pipeline(row.pk) == "ready"
    row.refresh_from_db()
    assert not row.upload_sealed and row.content_key.startswith(f"tenants/acme/derivatives/{row.pk}/")
    # One request: the copy is CopyObject, not a part copy per 8 MiB.
    assert _copies(s3_calls) == ["CopyObject"]
    assert _full_reads(s3_calls, row.content_key) == 1 and _full_reads(s3_calls, row.storage_key) == 0


@pytest.fixture
def small_parts(s3, settings):
    from attachments.storage import reset_gateway

    settings.AIRLOCK_S3_TRANSFER = settings.AIRLOCK_S3_TRANSFER.replace(chunk_bytes=5 * MIB, threads=2)
    reset_gateway()
    return s3


def test_the_servers_uploads_use_the_configured_part_size(small_parts, tmp_path, s3_calls):
    from attachments.storage import get_gateway

    path = tmp_path / "made.bin"
    path.write_bytes(os.urandom(12 * MIB))
    key = "tenants/acme/derivatives/x/sanitized.mp4"
    assert get_gateway().write_file(key, path, content_type="video/mp4") == 12 * MIB
    assert len([op for op, _ in s3_calls if op == "UploadPart"]) == 3  # 5 + 5 + 2 MiB, not boto3's 8 + 4
    head = small_parts.client.head_object(Bucket=small_parts.bucket, Key=key)
    assert head["ContentType"] == "video/mp4" and head["ContentLength"] == 12 * MIB


# In a process of its own: moto serves these tests from inside the test process, and what it
# allocates for the bytes it receives would count too.
_UPLOAD_AND_MEASURE = """
import sys, tracemalloc
import django
django.setup()
from attachments.storage.s3 import S3Gateway
bucket, endpoint, key, path, how = sys.argv[1:]
PART = 16 << 20
gateway = S3Gateway(bucket=bucket, endpoint_url=endpoint, region="us-east-1",
                    transfer_chunk_bytes=PART, transfer_threads=4)
gateway.head(key)  # the client made before measuring
tracemalloc.start()
if how == "file":
    gateway.write_file(key, path, content_type="video/mp4")
elif how == "chunks":  # a body streamed through the server (an upload through it, tus)
    with open(path, "rb") as fh:
        gateway.write_chunks(key, iter(lambda: fh.read(1 << 20), b""), content_type="video/mp4")
else:  # what write_file did before: django-storages' save() of an open file
    with open(path, "rb") as fh:
        gateway._save(key, fh, "video/mp4")
print(tracemalloc.get_traced_memory()[1])
"""


def _upload_peak(s3, tmp_path, how: str) -> int:
    import subprocess
    import sys

    path = tmp_path / "made.bin"
    if not path.exists():
        path.write_bytes(os.urandom(64 * MIB))  # four parts
    key = f"tenants/acme/derivatives/y/{how}.mp4"
    done = subprocess.run(
        [sys.executable, "-c", _UPLOAD_AND_MEASURE, s3.bucket, s3.endpoint, key, str(path), how],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert s3.get(key) == path.read_bytes()
    return int(done.stdout.split()[-1])


def test_uploading_a_file_does_not_hold_its_parts_in_memory(s3, tmp_path):
    """Parts are read from the file as they are sent: memory does not grow with part size x threads."""
    peak = _upload_peak(s3, tmp_path, "file")
    assert peak < 16 * MIB, f"{peak / MIB:.1f} MiB: at least one 16 MiB part was held whole"
    # For contrast, the way it was: a file object's parts are read whole, four threads x 16 MiB.
    held = _upload_peak(s3, tmp_path, "fileobj")
    assert held >= 3 * 16 * MIB, f"{held / MIB:.1f} MiB"


def test_a_streamed_body_is_not_held_in_memory_either(s3, tmp_path):
    peak = _upload_peak(s3, tmp_path, "chunks")
    assert peak < 16 * MIB, f"{peak / MIB:.1f} MiB"


def _tus_upload(client, data: bytes, *, chunk: int = 3 * MIB) -> Attachment:
    """Upload `data` over tus in `chunk`-sized PATCHes; the server assembles the object on the last one."""
    import base64

    tus = {"HTTP_TUS_RESUMABLE": "1.0.0"}
    meta = ",".join(
        f"{k} {base64.b64encode(v.encode()).decode()}"
        for k, v in {"profile": "media", "filename": "clip.mp4", "content_type": "video/mp4"}.items()
    )
    created = client.post("/api/v1/tus/", **tus, HTTP_UPLOAD_LENGTH=str(len(data)), HTTP_UPLOAD_METADATA=meta)
    assert created.status_code == 201, created.content
    path = created["Location"].removeprefix("http://testserver")
    for start in range(0, len(data), chunk):
        body = data[start : start + chunk]
        sent = client.generic(
            "PATCH", path, body, content_type="application/offset+octet-stream", **tus, HTTP_UPLOAD_OFFSET=str(start)
        )
        assert sent.status_code == 204, sent.content
    return Attachment.objects.get(pk=path.rsplit("/", 1)[1])


@pytest.mark.parametrize("size", [300_000, 11 * MIB], ids=["one-object", "multipart"])
def test_a_tus_upload_is_read_in_place_and_downloaded_once(s3, alice, api, s3_calls, size):
    """tus on S3: the server wrote the key itself (a plain object, or the multipart upload it completed)
    and no client holds a URL for it, so intake takes no snapshot."""
    data = mp4_bytes(size)
    row = _tus_upload(api(alice), data)
    assert row.upload_sealed and row.uploaded_at is not None

    assert run_pipeline(row.pk) == "ready"
    row.refresh_from_db()
    assert _copies(s3_calls) == []
    assert row.content_key == "" and row.working_key == row.storage_key
    assert s3.get(row.storage_key) == data
    assert _full_reads(s3_calls, row.storage_key) == 1
