"""Shared by the archive tests of both storage modes: ready files committed to a ref, and the ZIP read back."""

from __future__ import annotations

import hashlib
import io
import zipfile

import requests

from attachments.models import Attachment


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def commit(client, ids: list[str], ref: str) -> None:
    response = client.post("/api/v1/attachments/commit", {"ids": ids, "ref": ref}, format="json")
    assert response.status_code == 200, response.content


def assert_archive_is_what_download_serves(client, ref: str, ids: list[str], zipped: bytes) -> list[str]:
    """The ZIP opens with zipfile, holds exactly these files under unique names, each the served bytes."""
    with zipfile.ZipFile(io.BytesIO(zipped)) as archive:
        assert archive.testzip() is None
        infos = archive.infolist()
        names = [info.filename for info in infos]
        assert len(names) == len(set(n.casefold() for n in names)) == len(ids)
        rows = list(Attachment.objects.filter(pk__in=ids).order_by("created_at", "id"))
        for info, row in zip(infos, rows, strict=True):
            member = archive.read(info)
            assert info.compress_type == zipfile.ZIP_STORED
            served = client.get(f"/api/v1/attachments/{row.pk}/download")
            assert served.status_code in (200, 302)
            assert hashlib.sha256(member).hexdigest() == row.sha256 and len(member) == row.size
            if served.status_code == 200:
                assert member == body(served)
    return names


def served(client, path: str) -> bytes:
    """What a GET of `path` serves: the body, or the bucket's through its presigned redirect (S3)."""
    response = client.get(path)
    if response.status_code == 302:
        fetched = requests.get(response["Location"], timeout=30)
        assert fetched.status_code == 200
        return fetched.content
    assert response.status_code == 200, response.content
    return body(response)


def members(zipped: bytes) -> dict[str, bytes]:
    """name → bytes of each member, in archive order (checked with testzip first)."""
    with zipfile.ZipFile(io.BytesIO(zipped)) as archive:
        assert archive.testzip() is None
        return {info.filename: archive.read(info) for info in archive.infolist()}


def assert_web_archive(client, ref: str, *, video: str, photo: str, video_name: str) -> None:
    """A ref holding an HEVC video whose web rendition is ready and a photo, archived both ways.

    With `renditions=web` the video's member is the rendition's bytes (as `web` serves them),
    named like its download with `.mp4`; the photo is its served copy. Without it, both are
    what `download` serves. The length is known in advance either way.
    """
    as_web = client.get(f"/api/v1/refs/{ref}/archive?renditions=web")
    assert as_web.status_code == 200
    zipped = body(as_web)
    assert int(as_web["Content-Length"]) == len(zipped)
    stem = video_name.rsplit(".", 1)[0]
    web = served(client, f"/api/v1/attachments/{video}/web")
    download = served(client, f"/api/v1/attachments/{video}/download")
    assert web != download and web[4:8] == b"ftyp"
    assert members(zipped) == {f"{stem}.mp4": web, "photo.jpg": served(client, f"/api/v1/attachments/{photo}/download")}

    plain = client.get(f"/api/v1/refs/{ref}/archive")
    assert plain.status_code == 200
    zipped = body(plain)
    assert int(plain["Content-Length"]) == len(zipped)
    assert list(members(zipped).values())[0] == download
