"""The S3 gateway implements every verb of the storage protocol against a real HTTP S3."""

from __future__ import annotations

import pytest

from attachments.storage import get_gateway
from attachments.storage.base import StorageError, move
from attachments.storage.s3 import MIN_PART_SIZE, S3Gateway, part_plan

pytestmark = [pytest.mark.s3, pytest.mark.django_db]

KEY = "tenants/acme/media/0b5c3f1e-7c1a-4d5e-9f00-000000000001"


def test_get_gateway_picks_s3_from_settings(s3):
    gateway = get_gateway()
    assert isinstance(gateway, S3Gateway) and gateway.name == "s3" and gateway.bucket == s3.bucket
    gateway.ping()


def test_write_head_read_range_iterate_download_list(s3, tmp_path):
    gateway = get_gateway()
    data = bytes(range(256)) * 40  # 10,240 bytes
    assert gateway.write_chunks(KEY, [data[:5000], data[5000:]], content_type="video/mp4") == len(data)
    info = gateway.head(KEY)
    assert info is not None and info.size == len(data) and info.etag and info.last_modified is not None
    assert s3.client.head_object(Bucket=s3.bucket, Key=KEY)["ContentType"] == "video/mp4"

    assert gateway.read_range(KEY, 0, 4100) == data[:4100]
    assert gateway.read_range(KEY, 10_000, 4100) == data[10_000:]
    assert gateway.read_range(KEY, len(data) + 5, 10) == b""
    assert b"".join(gateway.iter_chunks(KEY, chunk_size=999)) == data
    assert b"".join(gateway.iter_chunks(KEY, start=100, end=199)) == data[100:200]

    target = tmp_path / "copy"
    assert gateway.download_to(KEY, target, max_bytes=len(data)) == len(data)
    assert target.read_bytes() == data
    with pytest.raises(StorageError):
        gateway.download_to(KEY, tmp_path / "short", max_bytes=len(data) - 1)

    listed = {o.key: o.size for o in gateway.list_prefix("tenants/acme/")}
    assert listed == {KEY: len(data)}


def test_write_file_sets_content_type(s3, tmp_path):
    path = tmp_path / "thumb.webp"
    path.write_bytes(b"RIFF....WEBPVP8 ")
    key = "tenants/acme/derivatives/0b5c3f1e-7c1a-4d5e-9f00-000000000001/thumbnail.webp"
    assert get_gateway().write_file(key, path, content_type="image/webp") == path.stat().st_size
    assert s3.client.head_object(Bucket=s3.bucket, Key=key)["ContentType"] == "image/webp"


def test_a_write_whose_body_raises_leaves_nothing(s3):
    def body():
        yield b"x" * 1000
        raise ValueError("body grew past its limit")

    with pytest.raises(ValueError):
        get_gateway().write_chunks(KEY, body())
    assert not s3.exists(KEY)


def test_missing_objects_are_answers_not_errors(s3):
    gateway = get_gateway()
    assert gateway.head(KEY) is None
    assert gateway.delete(KEY) is False
    with pytest.raises(StorageError):
        gateway.read_range(KEY, 0, 10)
    with pytest.raises(StorageError):
        gateway.copy(KEY, "quarantine/" + KEY)


def test_copy_delete_and_quarantine_move(s3):
    gateway = get_gateway()
    s3.put(KEY, b"original bytes")
    move(gateway, KEY, "quarantine/" + KEY)
    assert not s3.exists(KEY)
    assert s3.get("quarantine/" + KEY) == b"original bytes"
    assert gateway.delete("quarantine/" + KEY) is True
    assert not s3.exists("quarantine/" + KEY)


def test_a_copy_too_large_for_one_copyobject_is_copied_in_parts(s3, monkeypatch):
    from botocore.exceptions import ClientError

    gateway = get_gateway()
    s3.put(KEY, b"original bytes")
    one_request = gateway.client.copy_object
    refused = []

    def over_five_gib_once(**kwargs):
        if not refused:  # S3's answer to a CopyObject whose source is over 5 GiB
            refused.append(kwargs["Key"])
            raise ClientError(
                {"Error": {"Code": "InvalidRequest"}, "ResponseMetadata": {"HTTPStatusCode": 400}}, "CopyObject"
            )
        return one_request(**kwargs)

    monkeypatch.setattr(gateway.client, "copy_object", over_five_gib_once)
    gateway.copy(KEY, "quarantine/" + KEY)  # the managed copy: it sizes the source, then copies
    assert refused == ["quarantine/" + KEY]
    assert s3.get("quarantine/" + KEY) == b"original bytes"


def test_deleting_without_a_look_first(s3):
    gateway = get_gateway()
    s3.put(KEY, b"original bytes")
    gateway.delete_unchecked(KEY)
    assert not s3.exists(KEY)
    gateway.delete_unchecked(KEY)  # not there: S3's DELETE succeeds all the same


@pytest.mark.parametrize("key", ["../etc/passwd", "tenants/../x", "", "tenants//x", "a/.hidden/b"])
def test_keys_we_never_mint_are_refused(s3, key):
    with pytest.raises(StorageError):
        get_gateway().head(key)


def test_ping_fails_for_a_missing_bucket(s3, settings):
    from attachments.storage import reset_gateway

    settings.AIRLOCK_S3_BUCKET = s3.bucket + "-missing"
    reset_gateway()
    with pytest.raises(StorageError):
        get_gateway().ping()


def test_a_bad_upload_method_is_refused(s3, settings):
    from attachments.storage import reset_gateway

    settings.AIRLOCK_S3_UPLOAD_METHOD = "PATCH"
    reset_gateway()
    with pytest.raises(StorageError):
        get_gateway()


@pytest.mark.parametrize(
    ("total", "part_size", "expected"),
    [
        (11 * 2**20, 5 * 2**20, [5 * 2**20, 5 * 2**20, 2**20]),
        (10 * 2**20, 5 * 2**20, [5 * 2**20, 5 * 2**20]),
        (6 * 2**20, 1 * 2**20, [MIN_PART_SIZE, 2**20]),  # never below S3's 5 MiB minimum
    ],
)
def test_part_plan(total, part_size, expected):
    assert part_plan(total, part_size) == expected


def test_part_plan_stays_within_ten_thousand_parts():
    plan = part_plan(100 * 2**30, 5 * 2**20)
    assert len(plan) <= 10_000 and sum(plan) == 100 * 2**30


def test_ensure_bucket_creates_a_missing_bucket_once(s3, settings):
    import uuid as _uuid

    from attachments.storage import reset_gateway
    from attachments.storage.s3 import S3Gateway

    settings.AIRLOCK_S3_BUCKET = f"fresh-{_uuid.uuid4().hex[:8]}"
    reset_gateway()
    gateway = S3Gateway.from_settings()
    assert gateway.ensure_bucket() is True
    assert gateway.ensure_bucket() is False
    gateway.ping()
