"""GET /api/v1/refs/{ref}/archive: the ref's available files as one streamed ZIP, and its signed link."""

from __future__ import annotations

import struct
from urllib.parse import quote, urlsplit

import pytest
from django.test import Client

from attachments import archive
from attachments.models import Attachment, TransitionLog
from attachments.storage import get_gateway
from processing import transcode
from tests.corpus import corpus_dir
from tests.refs.archive_support import (
    assert_archive_is_what_download_serves,
    assert_web_archive,
    body,
    commit,
    members,
)
from tests.support import jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db

HEVC = corpus_dir() / "generated" / "video_hevc_location_rotated.mov"
H264 = corpus_dir() / "generated" / "video_h264_aac.mp4"


def _ready(client, n: int, *, filename=lambda i: f"photo-{i}.jpg", size=(64, 48)) -> list[str]:
    ids = []
    for i in range(n):
        data = jpeg_bytes((size[0] + i % 7, size[1]), color=(i * 5 % 256, 100, 200 - i % 100))
        pk = upload(client, data, filename=filename(i))
        assert run_pipeline(pk) == "ready"
        ids.append(pk)
    return ids


def test_a_zip_of_50_files_opens_and_every_member_is_the_served_bytes(alice, bob, api):
    client = api(alice)
    ids = _ready(client, 50, filename=lambda i: "IMG_0001.JPG" if i % 2 else f"photo-{i}.jpg")
    commit(client, ids, "wedding/2026")
    response = api(bob).get(f"/api/v1/refs/{quote('wedding/2026', safe='')}/archive")  # a member of the tenant
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "application/zip"
    assert 'filename="wedding_2026.zip"' in response["Content-Disposition"]
    zipped = body(response)
    assert int(response["Content-Length"]) == len(zipped)  # known before a byte was read
    names = assert_archive_is_what_download_serves(api(bob), "wedding/2026", ids, zipped)
    assert names[1] == "IMG_0001.JPG" and names[3] == "IMG_0001 (2).JPG" and names[0] == "photo-0.jpg"
    audit = TransitionLog.objects.filter(transition="archived")
    assert audit.count() == 50 and {e.details["archive"] for e in audit} == {response["X-Archive-Id"]}
    assert {e.actor for e in audit} == {"user:bob"} and audit.first().details["files"] == 50


def test_only_ready_files_committed_to_the_ref_go_in(alice, api):
    client = api(alice)
    kept, staged, elsewhere, released = _ready(client, 4)
    commit(client, [kept, released], "album")
    commit(client, [elsewhere], "other")
    assert client.post("/api/v1/attachments/release", {"ids": [released]}, format="json").status_code == 200
    pending = upload(client, jpeg_bytes(), filename="late.jpg")  # not processed: not ready
    commit(client, [pending], "album")
    zipped = body(client.get("/api/v1/refs/album/archive"))
    assert assert_archive_is_what_download_serves(client, "album", [kept], zipped) == ["photo-0.jpg"]
    assert staged not in (kept, released)


def test_another_tenant_an_unknown_ref_and_no_credential_get_no_archive(alice, mallory, api):
    client = api(alice)
    commit(client, _ready(client, 2), "album")
    assert api(mallory).get("/api/v1/refs/album/archive").status_code == 404
    assert client.get("/api/v1/refs/nothing-here/archive").status_code == 404
    assert Client().get("/api/v1/refs/album/archive").status_code == 401
    assert api(mallory).get("/api/v1/refs/album/archive-link").status_code == 404


def test_the_signed_link_serves_the_same_zip_without_a_header_and_only_for_its_ref(alice, api):
    client = api(alice)
    ids = _ready(client, 3)
    commit(client, ids, "album")
    commit(client, _ready(client, 1), "other")
    link = client.get("/api/v1/refs/album/archive-link").json()
    parts = urlsplit(link["url"])
    assert parts.path == "/api/v1/refs/album/archive" and "sig=" in parts.query
    anonymous = Client()
    signed = anonymous.get(f"{parts.path}?{parts.query}")
    assert signed.status_code == 200
    assert_archive_is_what_download_serves(client, "album", ids, body(signed))
    assert anonymous.get(f"/api/v1/refs/other/archive?{parts.query}").status_code == 403
    forged = parts.query.replace("sig=", "sig=x")
    assert anonymous.get(f"{parts.path}?{forged}").json()["error"]["code"] == "SIGNATURE_INVALID"
    assert anonymous.get(f"{parts.path}?{parts.query.replace('t=acme', 't=evil')}").status_code == 403
    # The gate holds at use: a file released after the link was minted is no longer in it.
    assert client.post("/api/v1/attachments/release", {"ids": ids[:1]}, format="json").status_code == 200
    again = anonymous.get(f"{parts.path}?{parts.query}")
    assert_archive_is_what_download_serves(client, "album", ids[1:], body(again))


def _hevc_video_and_photo(client) -> tuple[str, str]:
    """An iPhone clip (HEVC in MOV) and a photo, both ready; the clip's web rendition not made yet."""
    video = upload(client, HEVC.read_bytes(), profile="media", filename="IMG_0001.MOV", content_type="video/quicktime")
    assert run_pipeline(video) == "ready"
    photo = upload(client, jpeg_bytes((64, 48)), filename="photo.jpg")
    assert run_pipeline(photo) == "ready"
    return video, photo


def test_with_renditions_web_a_video_goes_in_as_its_web_rendition_once_ready(alice, api):
    client = api(alice)
    video, photo = _hevc_video_and_photo(client)
    commit(client, [video, photo], "album")
    # Pending: the video goes in as its download until the rendition is made.
    pending = members(body(client.get("/api/v1/refs/album/archive?renditions=web")))
    assert list(pending) == ["IMG_0001.MOV", "photo.jpg"]
    assert pending["IMG_0001.MOV"] == body(client.get(f"/api/v1/attachments/{video}/download"))

    assert transcode.transcode_one(video) == "ready"
    assert_web_archive(client, "album", video=video, photo=photo, video_name="IMG_0001.MOV")
    audit = TransitionLog.objects.filter(transition="archived").order_by("id")
    assert [e.details.get("renditions") for e in audit] == ["web", "web", "web", "web", None, None]


def test_the_web_member_is_named_like_the_others_made_unique(alice, api):
    client = api(alice)
    video, photo = _hevc_video_and_photo(client)
    plays = upload(client, H264.read_bytes(), profile="media", filename="IMG_0001.mp4", content_type="video/mp4")
    assert run_pipeline(plays) == "ready"  # H.264: needs no rendition, goes in as its download
    assert transcode.transcode_one(video) == "ready"
    commit(client, [video, photo, plays], "album")
    zipped = members(body(client.get("/api/v1/refs/album/archive?renditions=web")))
    assert list(zipped) == ["IMG_0001.mp4", "photo.jpg", "IMG_0001 (2).mp4"]
    assert zipped["IMG_0001 (2).mp4"] == body(client.get(f"/api/v1/attachments/{plays}/download"))


def test_renditions_takes_only_web(alice, api):
    client = api(alice)
    commit(client, _ready(client, 1), "album")
    for query in ("renditions=poster", "renditions=", "renditions=WEB", "renditions=web&renditions=web"):
        for path in ("archive", "archive-link"):
            response = client.get(f"/api/v1/refs/album/{path}?{query}")
            assert response.status_code == 400, (path, query)
            error = response.json()["error"]
            assert error["code"] == "VALIDATION_ERROR" and list(error["details"]) == ["renditions"]
    assert not TransitionLog.objects.filter(transition="archived").exists()


def test_the_signed_link_carries_renditions_web(alice, api):
    client = api(alice)
    video, photo = _hevc_video_and_photo(client)
    assert transcode.transcode_one(video) == "ready"
    commit(client, [video, photo], "album")
    plain = urlsplit(client.get("/api/v1/refs/album/archive-link").json()["url"])
    assert "renditions" not in plain.query
    link = urlsplit(client.get("/api/v1/refs/album/archive-link?renditions=web").json()["url"])
    assert link.path == "/api/v1/refs/album/archive" and "renditions=web" in link.query
    zipped = members(body(Client().get(f"{link.path}?{link.query}")))
    assert zipped["IMG_0001.mp4"] == body(client.get(f"/api/v1/attachments/{video}/web"))
    unsigned = members(body(Client().get(f"{plain.path}?{plain.query}")))
    assert list(unsigned) == ["IMG_0001.MOV", "photo.jpg"]


def test_the_archive_is_streamed_from_storage_chunk_by_chunk_not_built(alice, api, monkeypatch):
    client = api(alice)
    ids = _ready(client, 5, size=(640, 480))
    commit(client, ids, "album")
    gateway = get_gateway()
    opened, real = [], gateway.iter_chunks

    def counting(key, **kwargs):
        opened.append(kwargs.get("chunk_size"))
        yield from real(key, **kwargs)

    monkeypatch.setattr(gateway, "iter_chunks", counting)
    monkeypatch.setattr(archive, "CHUNK", 512)  # small, so a member takes several reads
    response = client.get("/api/v1/refs/album/archive")
    assert response.streaming and opened == []  # the answer started before any object was opened
    pieces = list(response.streaming_content)
    assert opened == [512] * 5
    # No piece is a whole member, let alone the archive: each is a chunk or a header.
    sizes = Attachment.objects.filter(pk__in=ids).values_list("size", flat=True)
    assert max(len(p) for p in pieces) <= 512 + 200 < min(sizes)
    assert sum(len(p) for p in pieces) == int(response["Content-Length"])


def test_storage_starts_reading_the_next_members_while_one_is_sent(alice, api, monkeypatch):
    # Each member's first read would otherwise wait on the disk with nothing else going on.
    client = api(alice)
    ids = _ready(client, 6, size=(320, 240))
    commit(client, ids, "album")
    keys = {a.served_key: a.size for a in Attachment.objects.filter(pk__in=ids)}
    gateway = get_gateway()
    events: list[tuple[str, str, int]] = []
    real_read, real_prefetch = gateway.iter_chunks, gateway.prefetch

    def reading(key, **kwargs):
        events.append(("read", key, 0))
        yield from real_read(key, **kwargs)

    def prefetching(key, length):
        events.append(("prefetch", key, length))
        real_prefetch(key, length)

    monkeypatch.setattr(gateway, "iter_chunks", reading)
    monkeypatch.setattr(gateway, "prefetch", prefetching)
    # A window of three members (starts within two of the largest, the fourth's past it).
    window = 2 * max(keys.values()) + 1
    assert 3 * min(keys.values()) >= window
    monkeypatch.setattr(archive, "READAHEAD", window)
    response = client.get("/api/v1/refs/album/archive")
    assert events == []  # nothing asked of storage before the body is read
    zipped = body(response)
    seen = list(events)  # what the archive asked of storage (the downloads below read too)
    assert assert_archive_is_what_download_serves(client, "album", ids, zipped)
    hinted = [key for kind, key, _ in seen if kind == "prefetch"]
    assert sorted(hinted) == sorted(keys) and len(hinted) == len(set(hinted))
    assert all(length == keys[key] for kind, key, length in seen if kind == "prefetch")
    reads = [key for kind, key, _ in seen if kind == "read"]
    assert sorted(reads) == sorted(keys)
    # When the first member is read, the two after it are on their way already.
    first_read = seen.index(("read", reads[0], 0))
    assert [key for kind, key, _ in seen[:first_read] if kind == "prefetch"] == reads[:3]
    for key in reads:
        assert ("prefetch", key, keys[key]) in seen[: seen.index(("read", key, 0))]  # hinted before its read


def test_a_prefetch_hint_for_a_missing_object_is_silent(tmp_path):
    from attachments.storage.local import LocalGateway

    gateway = LocalGateway(tmp_path)
    gateway.prefetch("tenant/missing.jpg", 1 << 20)  # the read itself reports a missing object
    (tmp_path / "tenant").mkdir()
    (tmp_path / "tenant" / "there.jpg").write_bytes(b"x" * 10)
    gateway.prefetch("tenant/there.jpg", 1 << 20)


def test_zip64_past_4_gib_with_its_length_known_in_advance(monkeypatch):
    big = 5 << 30
    members = [archive.Member(name="film.mov", key="k", size=big), archive.Member(name="a.jpg", key="j", size=10)]

    def zeros(key, index, readahead):
        yield bytes(10) if key == "j" else bytes(1 << 20)  # never read to the end here

    monkeypatch.setattr(archive, "_chunks", zeros)
    stream = archive.archive_stream(members)
    assert len(stream) > big + 10
    head = next(iter(stream))
    assert head[:4] == b"PK\x03\x04" and struct.unpack_from("<H", head, 4)[0] >= 45  # version needed: ZIP64
    name_len, extra_len = struct.unpack_from("<HH", head, 26)
    extra = head[30 + name_len : 30 + name_len + extra_len]
    assert extra[:2] == b"\x01\x00"  # the ZIP64 extended information field


def test_names_are_made_unique_case_insensitively():
    assert archive.unique_names(["a.jpg", "A.JPG", "a.jpg", "noext", "noext", ".hidden", ".hidden"]) == [
        "a.jpg",
        "A (2).JPG",
        "a (3).jpg",
        "noext",
        "noext (2)",
        ".hidden",
        ".hidden (2)",
    ]
