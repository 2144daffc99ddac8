"""A media file whose packets end well before the duration its headers declare is corrupt.

A clip cut after its `moov` (an upload that stopped, a copy that ran out of disk) still
declares its whole length: without this, it is `ready` and its metadata promises 8 s of
a copy that plays 4. The packet walk of the served copy (remux.py, packets.PacketSpan)
says where the packets really end, and whether the demuxer had to cut a sample short
because the sample tables point past the end of the file.

"Well before" leaves room for what honest files do: an audio track a frame shorter than
the video, an edit list trimming a few frames, a last frame's duration not written.
"""

from __future__ import annotations

from typing import Any

from .outcome import Rejected

# Sniffed formats whose duration is declared by the headers. MP3's is an estimate from the
# first frame's bit rate (wrong by design for a VBR file without a Xing header): not held to it.
DECLARED = frozenset({"mov", "matroska", "wav", "ogg"})
SHORTFALL_SECONDS = 0.5
SHORTFALL_FRACTION = 0.05


def check_complete(fmt: str, declared_seconds: float | None, reach: dict[str, Any]) -> None:
    """Reject (corrupt) a file whose packets stop short of its declared duration, naming both."""
    if fmt not in DECLARED or declared_seconds is None:
        return
    end = reach.get("packets_end_seconds")
    if end is None:
        return  # no packet at all is remux's own verdict
    shortfall = declared_seconds - end
    if shortfall > max(SHORTFALL_SECONDS, SHORTFALL_FRACTION * declared_seconds):
        raise Rejected(
            "corrupt",
            f"truncated: the packets end at {end:.2f} s, the headers declare {declared_seconds:.2f} s",
        )
    if fmt == "mov" and reach.get("cut_packets"):  # the mov demuxer flags a sample it read short
        raise Rejected(
            "corrupt",
            f"truncated: the sample tables point past the end of the file "
            f"(the packets end at {end:.2f} s, the headers declare {declared_seconds:.2f} s)",
        )
