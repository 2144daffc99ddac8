"""A ref's files as one ZIP, streamed: built as it is sent, never held whole in memory or on disk.

zipstream-ng writes the ZIP around each member's bytes as they come from storage, one
chunk at a time (local files and S3 alike, through the gateway's iter_chunks), so a
request holds one chunk and the small ZIP headers, whatever the archive's size. Members
are stored, not deflated: photos and videos are compressed already, and a stored
member's size is known before it is read, so the archive's length is known in advance
(`Content-Length`: a browser shows progress). ZIP64 records are written where a member
or the archive passes 4 GiB.

What goes in is what `download` serves (the location-free copy of a photo or video),
under the name `download` gives it, made unique within the archive.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import zipstream

from .serving import download_name
from .storage import get_gateway

CHUNK = 1 << 20  # per storage read: memory per request stays about one chunk


@dataclass(frozen=True)
class Member:
    name: str  # unique within the archive
    key: str  # the object download serves
    size: int


def unique_names(names: Iterable[str]) -> list[str]:
    """The names, each made unique (case-insensitively, as Windows and macOS compare): `a.jpg`, `a (2).jpg`."""
    taken: set[str] = set()
    out = []
    for name in names:
        stem, dot, ext = name.rpartition(".")
        if not dot or not stem:
            stem, dot, ext = name, "", ""
        candidate, n = name, 1
        while candidate.casefold() in taken:
            n += 1
            candidate = f"{stem} ({n}){dot}{ext}"
        taken.add(candidate.casefold())
        out.append(candidate)
    return out


def members_of(attachments: Iterable) -> list[Member]:
    """The archive's members for ready attachments, in the given order."""
    rows = [a for a in attachments if a.served_key and a.size is not None]
    names = unique_names(download_name(a.filename, a.content_type) for a in rows)
    return [Member(name=name, key=a.served_key, size=a.size) for name, a in zip(names, rows, strict=True)]


def _chunks(key: str) -> Iterator[bytes]:
    # A generator: storage is opened only when the ZIP reaches this member.
    yield from get_gateway().iter_chunks(key, chunk_size=CHUNK)


def archive_stream(members: list[Member]) -> zipstream.ZipStream:
    """The ZIP of `members`, sized (len() is its length) and not yet read: iterate it to stream."""
    zs = zipstream.ZipStream(compress_type=zipstream.ZIP_STORED, sized=True)
    for member in members:
        zs.add(_chunks(member.key), member.name, size=member.size)
    return zs
