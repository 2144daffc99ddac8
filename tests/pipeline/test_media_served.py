"""What `download` serves for video and audio: a stream copy with no location, its `moov` first.

Every check reads the bytes the API serves: MP4/MOV boxes walked by hand here, the
file reopened with PyAV, raw bytes searched for the location a phone wrote. Nothing
trusts a flag the code sets about itself.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator
from pathlib import Path

import av
import pytest

from attachments.models import Attachment
from processing.sandbox import Limits, run_job
from tests.corpus import corpus_dir
from tests.corpus import make_media as media
from tests.support import run_pipeline, upload

pytestmark = pytest.mark.django_db

GENERATED = corpus_dir() / "generated"
# Whatever a phone wrote about where and who; none of it may reach a served byte.
LOCATION_BYTES = (
    b"\xa9xyz",
    b"ISO6709",
    b"com.apple.quicktime",
    b"+48.8584",
    b"+35.6586",
    b"002.2945",
    b"iPhone",
    b"Apple",
    b"loci",
    b"2026-06-21",
)
_CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"udta", b"edts", b"dinf", b"meta", b"ilst"}
# What a muxer writes of its own: the brands, a track's handler and vendor, a language, Matroska's
# per-track DURATION and the muxing application (`Lavf`); nothing of the source.
_OWN_CONTAINER_KEYS = {"major_brand", "minor_version", "compatible_brands", "encoder"}
_OWN_STREAM_KEYS = {"handler_name", "vendor_id", "language", "DURATION", "encoder"}


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def boxes(
    data: bytes, start: int = 0, end: int | None = None, path: tuple[bytes, ...] = ()
) -> Iterator[tuple[tuple[bytes, ...], int, int]]:
    """(path of box types, payload start, payload end) of every ISO BMFF box, depth first."""
    end = len(data) if end is None else end
    pos = start
    while pos + 8 <= end:
        size, kind = struct.unpack_from(">I4s", data, pos)
        header = 8
        if size == 1:
            (size,) = struct.unpack_from(">Q", data, pos + 8)
            header = 16
        elif size == 0:
            size = end - pos
        assert size >= header and pos + size <= end, (kind, pos, size)
        here = (*path, kind)
        yield here, pos + header, pos + size
        if kind in _CONTAINERS:
            inner = pos + header
            if kind == b"meta" and data[inner + 4 : inner + 8] != b"hdlr":
                inner += 4  # ISO's meta is a FullBox; QuickTime's (Apple's mdta) is not
            yield from boxes(data, inner, pos + size, here)
        pos += size


def _facts(path: Path) -> dict:
    with av.open(str(path)) as container:
        streams = list(container.streams)
        facts = {
            "metadata": dict(container.metadata),
            "stream_metadata": [dict(s.metadata) for s in streams],
            "codecs": [(s.type, s.codec_context.name) for s in streams],
            "tags": [s.codec_context.codec_tag for s in streams if s.type == "video"],
            "rotation": None,
        }
        if container.streams.video:
            frame = next(container.decode(video=0))
            facts["rotation"] = frame.rotation
            facts["size"] = (frame.width, frame.height)
    return facts


def _served(client, tmp_path: Path, data: bytes, name: str, content_type: str) -> tuple[Attachment, bytes, Path]:
    attachment_id = upload(client, data, profile="media", filename=name, content_type=content_type)
    status = run_pipeline(attachment_id)
    row = Attachment.objects.get(pk=attachment_id)
    assert status == "ready", row.reason_message
    response = client.get(f"/api/v1/attachments/{row.pk}/download")
    assert response.status_code == 200
    served = _body(response)
    path = tmp_path / f"served-{name}"
    path.write_bytes(served)
    assert response["Content-Type"] == row.content_type
    assert int(response["Content-Length"]) == len(served) == row.size
    assert hashlib.sha256(served).hexdigest() == row.sha256
    return row, served, path


def _assert_no_metadata(served: bytes, path: Path) -> None:
    for needle in LOCATION_BYTES:
        assert needle not in served, needle
    facts = _facts(path)
    assert set(facts["metadata"]) <= _OWN_CONTAINER_KEYS, facts["metadata"]
    assert facts["metadata"].get("encoder", "Lavf") == "Lavf"
    for stream_metadata in facts["stream_metadata"]:
        assert set(stream_metadata) <= _OWN_STREAM_KEYS, stream_metadata


def _assert_moov_first_and_no_items(served: bytes) -> None:
    top = [path[0] for path, _, _ in boxes(served) if len(path) == 1]
    assert top[0] == b"ftyp" and b"moov" in top and b"mdat" in top
    assert top.index(b"moov") < top.index(b"mdat"), top  # faststart: a player starts before the end
    for path, start, end in boxes(served):
        # No location box, no Apple key list; the mp4 muxer's empty iTunes skeleton holds no item.
        assert path[-1] not in (b"\xa9xyz", b"keys", b"loci", b"mdta", b"XMP_", b"uuid"), path
        if path[-1] == b"ilst":
            assert end == start, "an ilst with items"
    assert not any(path[-1] == b"meta" and b"trak" in path for path, _, _ in boxes(served))


@pytest.mark.parametrize(
    ("name", "content_type", "rotation", "shown", "codecs", "tag"),
    [
        ("video_hevc_location_rotated.mov", "video/quicktime", -90, (64, 48), [("video", "hevc")], "hvc1"),
        ("video_h264_aac_location.mp4", "video/mp4", 0, (64, 48), [("video", "h264"), ("audio", "aac")], "avc1"),
    ],
)
def test_a_phones_video_is_served_without_its_location_moov_first(
    alice, api, tmp_path, name, content_type, rotation, shown, codecs, tag
):
    original = (GENERATED / name).read_bytes()
    # The file does carry a location, where phones write it: the test would prove nothing otherwise.
    assert b"\xa9xyz" in original
    original_facts = _facts(GENERATED / name)
    assert original_facts["metadata"]["location"].startswith("+")
    top = [path[0] for path, _, _ in boxes(original) if len(path) == 1]
    assert top.index(b"mdat") < top.index(b"moov")  # uploaded with its moov at the end

    row, served, path = _served(api(alice), tmp_path, original, name, content_type)
    assert row.content_type == content_type
    _assert_no_metadata(served, path)
    _assert_moov_first_and_no_items(served)
    facts = _facts(path)
    # A stream copy: the same codecs and tag, the display matrix kept (plays upright).
    assert facts["codecs"] == codecs == original_facts["codecs"]
    assert facts["tags"] == [tag] == original_facts["tags"]
    assert facts["rotation"] == rotation == original_facts["rotation"]
    assert facts["size"] == shown
    assert row.metadata["rotation"] == (-rotation) % 360
    # The original's video packets, byte for byte (no re-encode).
    assert _packets(path, "video") == _packets(GENERATED / name, "video")


def _packets(path: Path, kind: str) -> list[bytes]:
    with av.open(str(path)) as container:
        stream = container.streams.video[0] if kind == "video" else container.streams.audio[0]
        return [bytes(p) for p in container.demux(stream) if p.size]


def _with_metadata(fmt: str, **options: str) -> bytes:
    """A small file of `fmt` whose container and streams carry a location and a device."""

    def build(c):
        tag = {"location": "+48.8584+002.2945/", "artist": "Apple iPhone", "comment": "+35.6586+139.7454/"}
        c.metadata.update(tag)
        if fmt in ("mp3", "ogg", "wav", "ipod"):
            audio = media._audio(
                c,
                {"mp3": "libmp3lame", "ogg": "libopus", "wav": "pcm_s16le"}.get(fmt, "aac"),
                44100 if fmt == "mp3" else 48000,
            )
            audio.metadata.update(tag)
            media._write_audio(c, audio, 1)
            return
        video = media._video(c, "libvpx-vp9" if fmt == "webm" else "libx264")
        video.metadata.update(tag)
        media._write_video(c, video, 10)

    return media._made(fmt, build, **options)


@pytest.mark.parametrize(
    ("fmt", "options", "content_type"),
    [
        ("mov", {"movflags": "use_metadata_tags"}, "video/quicktime"),  # mdta keys, as an iPhone writes them
        ("mp4", {}, "video/mp4"),
        ("webm", {}, "video/webm"),
        ("ipod", {}, "audio/mp4"),
        ("mp3", {}, "audio/mpeg"),
        ("ogg", {}, "audio/ogg"),
        ("wav", {}, "audio/x-wav"),
    ],
)
def test_no_container_or_stream_metadata_survives_in_any_format(alice, api, tmp_path, fmt, options, content_type):
    data = _with_metadata(fmt, **options)
    assert any(needle in data for needle in LOCATION_BYTES)  # each muxer wrote the location somewhere
    row, served, path = _served(api(alice), tmp_path, data, f"clip.{fmt}", content_type)
    assert row.content_type == content_type
    _assert_no_metadata(served, path)
    if fmt in ("mov", "mp4", "ipod"):
        _assert_moov_first_and_no_items(served)
    if fmt == "mp3":
        assert not served.startswith(b"ID3") and served[-128:-125] != b"TAG"  # no ID3v2, no ID3v1


def test_download_of_a_served_video_answers_range_requests(alice, api, tmp_path):
    client = api(alice)
    name = "video_hevc_location_rotated.mov"
    row, served, _ = _served(client, tmp_path, (GENERATED / name).read_bytes(), name, "video/quicktime")
    url = f"/api/v1/attachments/{row.pk}/download"
    partial = client.get(url, HTTP_RANGE="bytes=0-99")
    assert partial.status_code == 206
    assert partial["Content-Range"] == f"bytes 0-99/{len(served)}" and partial["Accept-Ranges"] == "bytes"
    assert _body(partial) == served[:100]
    tail = client.get(url, HTTP_RANGE="bytes=-64")
    assert tail.status_code == 206 and _body(tail) == served[-64:]
    assert client.get(url, HTTP_RANGE=f"bytes={len(served)}-").status_code == 416


def test_a_pcm_track_mp4_muxers_refuse_is_served_as_quicktime(alice, api, tmp_path):
    # An MP4 (isom brand) holding PCM audio: the mp4 muxer refuses PCM, the copy is a MOV.
    data = media.mp4_h264_pcm()
    client = api(alice)
    row, served, path = _served(client, tmp_path, data, "clip.mp4", "video/mp4")
    assert row.content_type == "video/quicktime" and served[8:12] == b"qt  "
    assert [c for _, c in _facts(path)["codecs"]] == ["h264", "pcm_s16le"]
    with av.open(str(path), format="mov") as container:  # QuickTime's own demuxer reads it back
        assert [s.type for s in container.streams] == ["video", "audio"]
    # Named for what it is: a player or an OS going by the name expects a MOV.
    assert _disposition_name(client, row) == "clip.mov"
    assert row.filename == "clip.mp4"  # the resource keeps the uploaded name


def _disposition_name(client, row: Attachment) -> str:
    disposition = client.get(f"/api/v1/attachments/{row.pk}/download")["Content-Disposition"]
    kind, ascii_part, utf8_part = (part.strip() for part in disposition.split(";"))
    assert kind == "attachment"
    name = ascii_part.removeprefix('filename="').removesuffix('"')
    assert utf8_part == f"filename*=UTF-8''{name}"
    return name


@pytest.mark.parametrize(
    ("name", "expected"),
    [("clip.mp4", "clip.mp4"), ("Clip.MP4", "Clip.MP4"), ("clip.m4v", "clip.m4v"), ("clip", "clip")],
)
def test_an_ordinary_mp4_keeps_its_name(alice, api, tmp_path, name, expected):
    client = api(alice)
    data = (GENERATED / "video_h264_aac.mp4").read_bytes()
    row, served, _ = _served(client, tmp_path, data, name, "video/mp4")
    assert row.content_type == "video/mp4" and served[4:8] == b"ftyp" and served[8:12] != b"qt  "
    assert _disposition_name(client, row) == expected


def test_packets_past_the_duration_bound_are_refused_whatever_the_header_says(alice, api, settings):
    # Ten minutes of packets under headers that say 1 s: the probe reads the lie, the copy
    # counts the packets' own timestamps.
    settings.AIRLOCK_DECODE_LIMITS = settings.AIRLOCK_DECODE_LIMITS.replace(media_duration_seconds=300)
    data = (GENERATED / "video_lying_duration.mp4").read_bytes()
    attachment_id = upload(api(alice), data, profile="media", filename="lie.mp4", content_type="video/mp4")
    assert run_pipeline(attachment_id) == "rejected"
    row = Attachment.objects.get(pk=attachment_id)
    assert row.reason_code == "duration_limit", row.reason_message
    assert "more than the headers declare" in row.reason_message


def test_a_copy_that_outgrows_its_bound_is_rejected_not_served(tmp_path):
    # RLIMIT_FSIZE is what stops sample tables that point many packets at the same bytes.
    small = run_job("media", GENERATED / "video_h264_aac.mp4", tmp_path / "small", limits=Limits(max_output_bytes=2000))
    assert (small.outcome, small.reason_code) == ("rejected", "corrupt")
    assert "cannot copy the streams" in small.message
    enough = run_job("media", GENERATED / "video_h264_aac.mp4", tmp_path / "enough")
    assert enough.outcome == "ok" and enough.files["served"].stat().st_size > 2000


def test_a_media_job_may_write_about_its_inputs_size_and_no_other_job_may(tmp_path, settings):
    from processing.sandbox_config import limits_for

    big = tmp_path / "big"
    with open(big, "wb") as fh:
        fh.truncate(1 << 30)  # sparse: a 1 GiB input without writing it
    default = limits_for("image", big).max_output_bytes
    assert default == Limits().max_output_bytes
    media_bound = limits_for("media", big).max_output_bytes
    assert (1 << 30) < media_bound <= (1 << 30) * 9 // 8 + (16 << 20)
    assert limits_for("media", GENERATED / "audio.mp3").max_output_bytes == default


def test_a_webm_whose_codec_only_matroska_takes_downloads_as_mkv(alice, api, tmp_path):
    # H.264 in a file that says it is WebM (its EBML DocType): the webm muxer refuses H.264,
    # so the copy is Matroska. FFmpeg writes "matroska"; the DocType is rewritten in place
    # to "webm" plus a 4-byte Void element, so no size around it changes.
    # No B-frames: Matroska stores no DTS, and one guessed for reordered frames is another matter.
    def build(c):
        media._write_video(c, media._video(c, "libx264", bf="0"), 10)

    made = media._made("matroska", build)
    doc_type = b"\x42\x82\x88matroska"
    assert made.count(doc_type) == 1
    data = made.replace(doc_type, b"\x42\x82\x84webm" + b"\xec\x82\x00\x00")
    client = api(alice)
    row, served, path = _served(client, tmp_path, data, "clip.webm", "video/webm")
    assert row.content_type == "video/x-matroska" and doc_type in served[:64]
    assert [c for _, c in _facts(path)["codecs"]] == ["h264"]
    assert _disposition_name(client, row) == "clip.mkv"


def test_every_type_a_served_copy_may_have_has_a_download_extension():
    # The step's list of served types and the download's naming table are kept apart (the
    # attachments app never imports processing); a type added to one and not the other
    # would download under the upload's extension again.
    from attachments.serving import download_name
    from processing.steps.media import SERVED_EXT

    for content_type, ext in SERVED_EXT.items():
        assert download_name("clip.heic", content_type) == f"clip.{ext}", content_type
        assert download_name(f"clip.{ext.upper()}", content_type) == f"clip.{ext.upper()}", content_type
