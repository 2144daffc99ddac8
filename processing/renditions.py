"""Which videos get a `web` rendition, and the bounds of the job that makes one.

A video needs one when its served copy would not play in current Chrome, Firefox
and Safari without extensions. What plays everywhere, and so is left as it is
(its rendition `not_needed`):

- H.264 video in profile Constrained Baseline, Baseline, Main or High (8-bit 4:2:0;
  High 10, 4:2:2 and 4:4:4 do not decode in browsers),
- in an MP4/MOV container, with AAC or MP3 audio or none,
- longer side at most 1920 px and shorter side at most 1080 px,
- an overall bit rate at most WEB_MAX_BIT_RATE (20 Mbit/s: a phone's
  1080p H.264 stays as it is, a 4K clip's bit rate does not stream over a guest's phone).

Everything else gets one: HEVC (Chrome and Firefox decode it only with the right
hardware, and Firefox not at all on Linux), VP8/VP9 and AV1 (not every Safari plays
them), Opus audio in MP4, anything larger or heavier. (ProRes and MPEG-2/4 Part 2 never
get this far: the media allowlist rejects them.)
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from django.conf import settings

from .sandbox import Bounds, Limits

PLAYABLE_H264_PROFILES = frozenset({"Constrained Baseline", "Baseline", "Main", "High"})
PLAYABLE_AUDIO = frozenset({"aac", "mp3"})
MP4_FAMILY = "mov"  # FFmpeg's demuxer for MP4/MOV (media.sniff names it so)
WEB_LONG_EDGE, WEB_SHORT_EDGE = 1920, 1080
LONG_CLIP_LONG_EDGE = 1280
# Bits/s past which a playable video still gets a rendition (see above), and the clip length
# past which its rendition is 1280 px (a long clip's size and transcode time stay bounded).
WEB_MAX_BIT_RATE = 20_000_000
WEB_LONG_CLIP_MINUTES = 10.0
# The job's output may be this much larger than the bit rate cap allows (muxing, a short clip's
# first keyframes), plus a fixed allowance.
OUTPUT_SLACK = 1.5
OUTPUT_SLACK_BYTES = 16 << 20


def web_rendition_needed(facts: dict[str, Any]) -> str | None:
    """Why this video needs a web rendition ("hevc", "1920 px", …), or None when it plays as it is."""
    codec = facts.get("video_codec")
    if codec != "h264":
        return f"video codec {codec}"
    if facts.get("video_profile") not in PLAYABLE_H264_PROFILES:
        return f"H.264 profile {facts.get('video_profile')}"
    if str(facts.get("container") or "").split(",")[0] != MP4_FAMILY:
        return f"container {facts.get('container')}"
    audio = facts.get("audio_codec")
    if audio is not None and audio not in PLAYABLE_AUDIO:
        return f"audio codec {audio}"
    width, height = facts.get("width") or 0, facts.get("height") or 0
    if max(width, height) > WEB_LONG_EDGE or min(width, height) > WEB_SHORT_EDGE:
        return f"{width}x{height} px"
    bit_rate = facts.get("bit_rate") or 0
    if bit_rate > WEB_MAX_BIT_RATE:
        return f"{bit_rate} bit/s"
    return None


def long_edge_for(duration_seconds: float) -> int:
    """The rendition's long edge: 1920 px, or 1280 px past WEB_LONG_CLIP_MINUTES."""
    if duration_seconds > WEB_LONG_CLIP_MINUTES * 60:
        return LONG_CLIP_LONG_EDGE
    return WEB_LONG_EDGE


def job_bounds(base: Bounds, duration_seconds: float) -> Bounds:
    return replace(base, transcode_long_edge=long_edge_for(duration_seconds))


def job_limits(base: Limits, duration_seconds: float, bounds: Bounds) -> Limits:
    """CPU and wall time per started minute of video (one minute at least), output by the bit rate cap."""
    minutes = max(1, math.ceil(duration_seconds / 60))
    audio_bits = 128_000
    output = int((bounds.transcode_max_bit_rate + audio_bits) / 8 * max(duration_seconds, 1) * OUTPUT_SLACK)
    return replace(
        base,
        cpu_seconds=settings.AIRLOCK_SANDBOX_LIMITS.transcode_cpu_seconds_per_minute * minutes,
        wall_seconds=float(settings.AIRLOCK_SANDBOX_LIMITS.transcode_wall_seconds_per_minute * minutes),
        max_output_bytes=output + OUTPUT_SLACK_BYTES,
    )


def job_wall_seconds(duration_seconds: float) -> float:
    """How long a transcode of this clip may run: a claim older than this (and a grace) was lost."""
    return float(
        settings.AIRLOCK_SANDBOX_LIMITS.transcode_wall_seconds_per_minute * max(1, math.ceil(duration_seconds / 60))
    )
