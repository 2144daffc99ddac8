"""A ref's files as one ZIP, streamed: built as it is sent, never held whole in memory or on disk.

zipstream-ng writes the ZIP around each member's bytes as they come from storage, one
chunk at a time (local files and S3 alike, through the gateway's iter_chunks), so a
request holds one chunk and the small ZIP headers, whatever the archive's size. Members
are stored, not deflated: photos and videos are compressed already, and a stored
member's size is known before it is read, so the archive's length is known in advance
(`Content-Length`: a browser shows progress). ZIP64 records are written where a member
or the archive passes 4 GiB. Each member's CRC-32 is computed in the same pass that sends
it (zipstream-ng writes it in the data descriptor after the member): nothing is read twice.

While one member is sent, storage is asked to start reading the next ones (`_Readahead`,
local storage: the page cache), so the disk works while the CRC and the socket do.

What goes in is what `download` serves (the location-free copy of a photo or video),
under the name `download` gives it, made unique within the archive; or, when asked, a
video's web rendition (what `web` serves) under that name ending in `.mp4`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import accumulate

import zipstream

from .serving import download_name
from .storage import get_gateway

CHUNK = 1 << 20  # per storage read: memory per request stays about one chunk
READAHEAD = 32 << 20  # bytes past the current member's start that storage is asked to start reading


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


def _mp4_name(name: str) -> str:
    stem, dot, _ext = name.rpartition(".")
    return f"{stem if dot and stem else name}.mp4"


def members_of(attachments: Iterable, web: Mapping[object, tuple[str, int]] | None = None) -> list[Member]:
    """The archive's members for ready attachments, in the given order.

    `web`: attachment id → (key, size) of its ready web rendition; such a file goes
    in as the rendition, named like its download with `.mp4` (then made unique).
    """
    web = web or {}
    rows = [a for a in attachments if a.served_key and a.size is not None]
    picked = [web.get(a.pk) or (a.served_key, a.size) for a in rows]
    names = unique_names(
        _mp4_name(download_name(a.filename, a.content_type))
        if a.pk in web
        else download_name(a.filename, a.content_type)
        for a in rows
    )
    return [Member(name=name, key=key, size=size) for name, (key, size) in zip(names, picked, strict=True)]


class _Readahead:
    """Asks storage to start reading the members that come next while the current one is sent.

    Without it each member's first read waits on the disk while nothing else happens (the
    CRC, the socket): with photos of a few MB that wait is paid once per file. The members
    starting within READAHEAD bytes of the current one's start are hinted (each up to
    READAHEAD bytes; a long member's rest is the kernel's own sequential readahead). The
    hinted bytes go to the page cache, not to this process: memory stays one chunk.
    """

    def __init__(self, members: list[Member]) -> None:
        self._members = members
        self._starts = list(accumulate((m.size for m in members), initial=0))
        self._next = 0  # the first member not hinted yet

    def reached(self, index: int) -> None:
        gateway = get_gateway()
        horizon = self._starts[index] + READAHEAD
        self._next = max(self._next, index)
        while self._next < len(self._members) and self._starts[self._next] < horizon:
            member = self._members[self._next]
            gateway.prefetch(member.key, min(member.size, READAHEAD))
            self._next += 1


def _chunks(key: str, index: int, readahead: _Readahead) -> Iterator[bytes]:
    # A generator: storage is opened (and the next members hinted) only when the ZIP reaches this member.
    readahead.reached(index)
    yield from get_gateway().iter_chunks(key, chunk_size=CHUNK)


def archive_stream(members: list[Member]) -> zipstream.ZipStream:
    """The ZIP of `members`, sized (len() is its length) and not yet read: iterate it to stream."""
    zs = zipstream.ZipStream(compress_type=zipstream.ZIP_STORED, sized=True)
    readahead = _Readahead(members)
    for index, member in enumerate(members):
        zs.add(_chunks(member.key, index, readahead), member.name, size=member.size)
    return zs
