"""A ZIP member's bytes as a client would extract them, in bounded chunks.

Reads the entry's compressed data where zipstructure found it and decompresses it:
stored, deflate (zlib), Deflate64 (inflate64: what Windows' "Send to > Compressed folder"
writes for large folders), bzip2 and LZMA. Any other method raises NotImplementedError.

Every chunk is bounded: zlib and bz2 take an output limit per call; inflate64 and LZMA do
not, so they get at most SMALL_INPUT compressed bytes per call (Deflate64's densest code,
a 65,538-byte match in 18 bits, makes 1 KiB inflate to about 30 MiB at most).

A stream must end exactly at the entry's compressed size: bytes after its end are where a
reader that walks the stream (Java's ZipInputStream with a data descriptor) finds another
entry, so they are rejected/archive_uninspectable. zlib and bz2 say exactly where the
stream ended; Deflate64 is fed its last byte on its own, and its stream must not end
before it; LZMA may lack an end marker, so there the check is per SMALL_INPUT block.
"""

from __future__ import annotations

import bz2
import zlib
from collections.abc import Iterator
from typing import IO
from zipfile import LZMADecompressor  # type: ignore[attr-defined]  # untyped: the ZIP framing of LZMA

import inflate64

from .outcome import Rejected, short_repr
from .zipstructure import Entry

STORED, DEFLATED, DEFLATE64, BZIP2, LZMA = 0, 8, 9, 12, 14
CHUNK = 1 << 20  # decompressed bytes per step, where the decoder takes an output limit
READ = 256 << 10  # compressed bytes read from the file at once
SMALL_INPUT = 1 << 10  # compressed bytes per call to a decoder without an output limit


def _raw(fh: IO[bytes], entry: Entry) -> Iterator[bytes]:
    at, left = entry.data_offset, entry.compress_size
    while left:
        fh.seek(at)
        block = fh.read(min(READ, left))
        if not block:
            raise Rejected("corrupt", f"entry {short_repr(entry.name)} is truncated")
        at += len(block)
        left -= len(block)
        yield block


def _trailing(entry: Entry) -> Rejected:
    return Rejected(
        "archive_uninspectable",
        f"entry {short_repr(entry.name)}: its compressed stream ends before its compressed size"
        " (bytes after the stream are another reader's next entry)",
    )


def _unended(entry: Entry) -> Rejected:
    return Rejected("corrupt", f"entry {short_repr(entry.name)} does not inflate: its stream does not end")


def _deflate(fh: IO[bytes], entry: Entry) -> Iterator[bytes]:
    d = zlib.decompressobj(-15)
    for block in _raw(fh, entry):
        if d.eof:
            raise _trailing(entry)
        data = block
        while data and not d.eof:
            out = d.decompress(data, CHUNK)
            data = d.unconsumed_tail
            yield out
        if d.unused_data or data:
            raise _trailing(entry)
    while not d.eof and (out := d.decompress(b"", CHUNK)):
        yield out
    if not d.eof:
        raise _unended(entry)


def _bzip2(fh: IO[bytes], entry: Entry) -> Iterator[bytes]:
    d = bz2.BZ2Decompressor()
    for block in _raw(fh, entry):
        if d.eof:
            raise _trailing(entry)
        yield d.decompress(block, CHUNK)
        while not d.eof and not d.needs_input:
            yield d.decompress(b"", CHUNK)
        if d.unused_data:
            raise _trailing(entry)
    if not d.eof:
        raise _unended(entry)


def _deflate64(fh: IO[bytes], entry: Entry) -> Iterator[bytes]:
    d = inflate64.Inflater()
    fed = 0
    for block in _raw(fh, entry):
        for at in range(0, len(block), SMALL_INPUT):
            piece = block[at : at + SMALL_INPUT]
            fed += len(piece)
            if fed == entry.compress_size:
                # inflate64 reports the end as soon as the byte holding it arrives and
                # ignores what follows: the last byte alone shows whether the stream
                # ends there or earlier.
                piece, last = piece[:-1], piece[-1:]
                if piece:
                    if d.eof:
                        raise _trailing(entry)
                    yield d.inflate(piece)
                if d.eof:
                    raise _trailing(entry)
                yield d.inflate(last)
            else:
                if d.eof:
                    raise _trailing(entry)
                yield d.inflate(piece)
    if not d.eof:
        raise _unended(entry)


def _lzma(fh: IO[bytes], entry: Entry) -> Iterator[bytes]:
    d = LZMADecompressor()  # zipfile's: the ZIP framing (version, properties) around a raw LZMA1 stream
    for block in _raw(fh, entry):
        for at in range(0, len(block), SMALL_INPUT):
            if d.eof:  # an end marker before the compressed size runs out
                raise _trailing(entry)
            yield d.decompress(block[at : at + SMALL_INPUT])


def _stored(fh: IO[bytes], entry: Entry) -> Iterator[bytes]:
    yield from _raw(fh, entry)


_DECODERS = {STORED: _stored, DEFLATED: _deflate, DEFLATE64: _deflate64, BZIP2: _bzip2, LZMA: _lzma}


def chunks(fh: IO[bytes], entry: Entry) -> Iterator[bytes]:
    """The entry's decompressed bytes, chunk by chunk (NotImplementedError for a method we lack)."""
    decoder = _DECODERS.get(entry.method)
    if decoder is None:
        raise NotImplementedError(f"compression method {entry.method}")
    return decoder(fh, entry)
