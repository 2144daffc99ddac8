"""Shared by the archive tests of both storage modes: ready files committed to a ref, and the ZIP read back."""

from __future__ import annotations

import hashlib
import io
import zipfile

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
