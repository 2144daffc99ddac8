"""A media file is served whole or not at all: truncation is a verdict, and Matroska's missing DTSs are made up.

Every file is made with PyAV (tests/corpus/make_media.py) and goes through the whole
pipeline; what is checked is the verdict the API gives and the bytes it serves.
"""

from __future__ import annotations

import re
from pathlib import Path

import av
import pytest

from attachments.models import Attachment
from processing.sandbox.media import _open
from processing.sandbox.packets import with_decode_times
from tests.corpus import corpus_dir
from tests.corpus import make_media as media
from tests.support import run_pipeline, upload

pytestmark = pytest.mark.django_db

GENERATED = corpus_dir() / "generated"


def _verdict(client, data: bytes, name: str, content_type: str = "video/mp4") -> Attachment:
    attachment_id = upload(client, data, profile="media", filename=name, content_type=content_type)
    run_pipeline(attachment_id)
    return Attachment.objects.get(pk=attachment_id)


def test_a_clip_cut_after_its_moov_is_rejected_naming_both_durations(alice, api):
    row = _verdict(api(alice), (GENERATED / "video_cut_after_moov.mp4").read_bytes(), "cut.mp4")
    assert (row.status, row.reason_code) == ("rejected", "corrupt"), row.reason_message
    found = re.search(r"packets end at ([\d.]+) s, the headers declare ([\d.]+) s", row.reason_message)
    assert found, row.reason_message
    assert 2.0 < float(found[1]) < 5.0 and float(found[2]) == 8.0


def test_the_same_clip_whole_is_ready_with_its_duration(alice, api):
    row = _verdict(api(alice), media.mp4_8s_faststart(), "whole.mp4")
    assert row.status == "ready", row.reason_message
    assert row.metadata["duration_seconds"] == 8.0


def test_a_sample_table_pointing_past_the_end_is_rejected_even_when_little_is_missing(alice, api):
    # 300 bytes short: a few frames, well inside the duration's tolerance, but the last sample
    # the tables name runs past the end of the file.
    data = media.mp4_8s_faststart()
    row = _verdict(api(alice), data[:-300], "short.mp4")
    assert (row.status, row.reason_code) == ("rejected", "corrupt"), row.reason_message
    assert "sample tables point past the end of the file" in row.reason_message
    assert "the headers declare 8.00 s" in row.reason_message


def _frames(path: Path) -> list[int]:
    with av.open(str(path)) as container:
        return [frame.pts for frame in container.decode(container.streams.video[0])]


def test_h264_with_b_frames_in_a_webm_is_ready_and_served_whole(alice, api, tmp_path):
    data = (GENERATED / "video_h264_bframes.webm").read_bytes()
    client = api(alice)
    row = _verdict(client, data, "clip.webm", "video/webm")
    assert row.status == "ready", row.reason_message
    assert row.content_type == "video/x-matroska"
    response = client.get(f"/api/v1/attachments/{row.pk}/download")
    served = tmp_path / "served.mkv"
    served.write_bytes(b"".join(response.streaming_content) if response.streaming else response.content)
    original = tmp_path / "original.webm"
    original.write_bytes(data)
    # Every frame, the keyframe the demuxer gave no DTS among them, shown in the original's order.
    assert _frames(served) == _frames(original) and len(_frames(served)) == 20
    with av.open(str(served)) as container:
        assert container.streams.audio[0].codec_context.name == "aac"


def test_matroska_decode_times_never_decrease_and_never_pass_the_presentation(tmp_path):
    path = GENERATED / "video_h264_bframes.webm"
    with _open(path, "matroska") as container:
        raw = [(p.pts, p.dts) for p in container.demux(container.streams.video[0]) if p.size]
    # What the headers-only open hands over: no DTS for the first packet, PTSs for the reordered.
    assert raw[0][1] is None and any(b is not None and a is not None and b > a for a, b in zip(raw, raw[1:]))
    with _open(path, "matroska") as container:
        timed = [(p.pts, p.dts) for p in with_decode_times(container.demux(container.streams.video[0]), "matroska")]
    assert sorted(pts for pts, _ in timed) == sorted(pts for pts, _ in raw)
    dts = [d for _, d in timed]
    assert all(d is not None for d in dts) and dts == sorted(dts)
    assert all(d <= p for p, d in timed)
