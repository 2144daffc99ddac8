"""What the served copy's packet walk learns on the way: decode times for Matroska, and how far
the packets really reach.

Decode times: Matroska stores only presentation times, so FFmpeg's matroska demuxer guesses
each DTS, and for a stream with B-frames the guess needs the codec's reorder delay, which
the probe's headers-only open (skip_frame=all) never learns: the first packet comes without
a DTS and reordered ones with their PTS as DTS, and the muxer refuses the copy ("non
monotonically increasing dts"). The Matroska muxer, like the format, keeps only PTSs, so
the copy's DTSs need only be what a muxer accepts: each packet's DTS is the smallest PTS
among it and the next REORDER_WINDOW packets of its stream. A frame is never shown more
than that many packets after it is decoded (H.264 and HEVC allow 16), so these DTSs
never decrease and never pass their packet's PTS; equal ones are allowed in Matroska.

Reach: a file cut after its `moov` still declares its whole duration, and the mov
demuxer stops quietly at the end of the bytes (the last sample, cut short, is flagged
corrupt). The span records the latest packet end per stream and whether a packet was
cut; truncation.py turns that into a verdict.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

REORDER_WINDOW = 16


def with_decode_times(packets: Iterable[Any], fmt: str) -> Iterator[Any]:
    """The demuxer's packets with data (no end-of-stream markers), Matroska's with DTSs of our own.

    A Matroska stream's packets are held back at most REORDER_WINDOW at a time.
    """
    if fmt != "matroska":
        yield from (packet for packet in packets if packet.size)
        return
    held: dict[int, deque[Any]] = {}
    last: dict[int, int] = {}
    for packet in packets:
        if not packet.size:
            continue
        queue = held.setdefault(packet.stream.index, deque())
        queue.append(packet)
        if len(queue) > REORDER_WINDOW:
            yield _timed(queue, last)
    for queue in held.values():
        while queue:
            yield _timed(queue, last)


def _timed(queue: deque[Any], last: dict[int, int]) -> Any:
    packet = queue.popleft()
    index = packet.stream.index
    times = [p.pts for p in (packet, *queue) if p.pts is not None]
    dts = min(times) if times else last.get(index, 0)
    packet.dts = max(dts, last.get(index, dts))  # a PTS out of every window's order: kept level
    if packet.pts is not None and packet.dts > packet.pts:
        packet.pts = packet.dts  # only for a stream reordered deeper than any codec allows
    last[index] = packet.dts
    return packet


@dataclass
class PacketSpan:
    """Seconds from the container's start to the end of its last packet; packets cut short."""

    start_seconds: float = 0.0
    ends: dict[int, float] = field(default_factory=dict)
    cut_packets: int = 0

    @classmethod
    def of(cls, container: Any) -> PacketSpan:
        start = container.start_time
        return cls(start_seconds=start / 1_000_000 if start is not None and start > 0 else 0.0)

    def add(self, packet: Any) -> None:
        base = packet.stream.time_base
        at = packet.pts if packet.pts is not None else packet.dts
        if at is None or not base:
            return
        end = float((at + (packet.duration or 0)) * base) - self.start_seconds
        index = packet.stream.index
        if end > self.ends.get(index, float("-inf")):
            self.ends[index] = end
        if packet.is_corrupt:
            self.cut_packets += 1

    def facts(self) -> dict[str, Any]:
        reach = max(self.ends.values()) if self.ends else None
        return {"packets_end_seconds": None if reach is None else round(reach, 3), "cut_packets": self.cut_packets}
