"""Make the video and audio files of the corpus with PyAV's encoders (tests/corpus/files/generated/).

    .venv/bin/python tests/corpus/make_media.py [name ...]

Small on purpose (a few KB each, a 64x48 picture): red square top left, blue bottom
right, so a test can tell a poster's orientation. The hostile ones are honest files
with one thing wrong: a long duration, a huge frame, a cut, a lying header, too many
streams, a codec outside the allowlist. Prints one line per file (size, sha256) for
MANIFEST.tsv, as make_generated.py does.
"""

from __future__ import annotations

import hashlib
import struct
import sys
import tempfile
from pathlib import Path

import av
from PIL import Image

OUT = Path(__file__).resolve().parent / "files" / "generated"
W, H = 64, 48
RED, BLUE, GREEN = (255, 0, 0), (0, 0, 255), (0, 200, 0)


def picture(width: int = W, height: int = H) -> Image.Image:
    im = Image.new("RGB", (width, height), GREEN)
    im.paste(RED, (0, 0, width // 2, height // 2))
    im.paste(BLUE, (width // 2, height // 2, width, height))
    return im


def _video(container, codec: str, *, rate: int = 10, width: int = W, height: int = H, **options: str):
    stream = container.add_stream(codec, rate=rate, options={"threads": "1", **options})
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
    return stream


def _audio(container, codec: str, rate: int = 48000):
    stream = container.add_stream(codec, rate=rate)
    stream.layout = "stereo"
    return stream


def _write_video(container, stream, frames: int, *, step: int = 1, image: Image.Image | None = None) -> None:
    image = image or picture(stream.width, stream.height)
    for i in range(frames):
        frame = av.VideoFrame.from_image(image)
        frame.pts = i * step
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)


def _write_audio(container, stream, seconds: float) -> None:
    size = stream.codec_context.frame_size or 1024
    pts = 0
    for _ in range(int(stream.rate * seconds) // size):
        frame = av.AudioFrame(format=stream.format.name, layout="stereo", samples=size)
        for plane in frame.planes:
            plane.update(bytes(plane.buffer_size))  # silence
        frame.sample_rate, frame.pts = stream.rate, pts
        pts += size
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)


def _made(fmt: str, build, **options: str) -> bytes:
    # Through a file: faststart rewrites the output by reopening it.
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"out.{fmt}"
        # bitexact: no random segment UID (WebM) or stream serial (Ogg), the same bytes every run.
        with av.open(str(path), "w", format=fmt, options={"fflags": "+bitexact", **options}) as container:
            build(container)
        return path.read_bytes()


def mp4_h264_aac() -> bytes:
    # FFmpeg's mp4 muxer writes the moov after the media data (no faststart).
    def build(c):
        video, audio = _video(c, "libx264"), _audio(c, "aac")
        _write_video(c, video, 20)
        _write_audio(c, audio, 2)

    return _made("mp4", build)


def mp4_h264_pcm() -> bytes:
    # PCM audio under an MP4 (isom) brand: FFmpeg's mp4 muxer refuses PCM, so it is a MOV inside.
    # Not a corpus file: the tests that serve its copy (a MOV) build it.
    def build(c):
        video, audio = _video(c, "libx264"), _audio(c, "pcm_s16le", 8000)
        _write_video(c, video, 10)
        _write_audio(c, audio, 1)

    return _made("mov", build, brand="isom")


def mp4_faststart() -> bytes:
    # moov first: what tests pad with a `free` box to any size (tests/s3/support.py mp4_bytes).
    def build(c):
        _write_video(c, _video(c, "libx264"), 10)

    return _made("mp4", build, movflags="faststart")


def mov_rotated() -> bytes:
    # Stored 64x48, shown 48x64: a display matrix turning it 90 degrees clockwise (a phone held
    # upright). The stored picture is the shown one turned back, so red is top left only once turned.
    def build(c):
        video = _video(c, "libx264")
        video.set_display_rotation(-90)  # FFmpeg's angle is counter-clockwise
        _write_video(c, video, 20, image=picture(H, W).transpose(Image.Transpose.ROTATE_90))

    return _made("mov", build)


def _box(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(payload), kind) + payload


def _udta_location(iso6709: str) -> bytes:
    # What Android's camera writes: moov/udta/\xa9xyz, a QuickTime string (length, language, text).
    text = iso6709.encode()
    return _box(b"udta", _box(b"\xa9xyz", struct.pack(">HH", len(text), 0x15C7) + text))


def _apple_meta(items: list[tuple[str, str]]) -> bytes:
    # What an iPhone writes: moov/meta with an `mdta` handler, `keys` naming each item and
    # `ilst` holding them by 1-based index, each in a UTF-8 `data` box.
    keys = b"".join(_box(b"mdta", key.encode()) for key, _ in items)
    ilst = b"".join(
        _box(struct.pack(">I", n), _box(b"data", struct.pack(">II", 1, 0) + value.encode()))
        for n, (_, value) in enumerate(items, start=1)
    )
    hdlr = _box(b"hdlr", bytes(8) + b"mdta" + bytes(13))
    return _box(b"meta", hdlr + _box(b"keys", struct.pack(">II", 0, len(items)) + keys) + _box(b"ilst", ilst))


def _moov_appended(data: bytes, extra: bytes) -> bytes:
    # The moov is last (written without faststart): growing it moves no sample offset.
    pos = data.rfind(b"moov") - 4
    size = struct.unpack(">I", data[pos : pos + 4])[0]
    assert pos + size == len(data), "the moov must be the last box"
    return data[:pos] + struct.pack(">I", size + len(extra)) + data[pos + 4 :] + extra


EIFFEL = "+48.8584+002.2945+035.000/"


def mov_hevc_location_rotated() -> bytes:
    # An iPhone's video, small: HEVC (`hvc1`) held upright (display matrix: 90 degrees clockwise),
    # its location in both places phones write it, and the device's make and model.
    def build(c):
        video = _video(c, "libx265", **{"x265-params": "log-level=none:pools=none:frame-threads=1"})
        video.codec_context.codec_tag = "hvc1"
        video.set_display_rotation(-90)
        _write_video(c, video, 20, image=picture(H, W).transpose(Image.Transpose.ROTATE_90))

    apple = _apple_meta(
        [
            ("com.apple.quicktime.location.ISO6709", EIFFEL),
            ("com.apple.quicktime.make", "Apple"),
            ("com.apple.quicktime.model", "iPhone 15 Pro"),
            ("com.apple.quicktime.software", "17.4"),
            ("com.apple.quicktime.creationdate", "2026-06-21T14:03:00+0200"),
        ]
    )
    return _moov_appended(_made("mov", build), _udta_location(EIFFEL) + apple)


def mp4_h264_aac_location() -> bytes:
    # An Android phone's video: H.264 + AAC, moov after the media data, \xa9xyz in moov/udta.
    return _moov_appended(mp4_h264_aac(), _udta_location("+35.6586+139.7454/"))


def mp4_hevc() -> bytes:
    # x265 on one thread (no pools, one frame thread): the same bytes every run.
    def build(c):
        video = _video(c, "libx265", **{"x265-params": "log-level=none:pools=none:frame-threads=1"})
        _write_video(c, video, 20)

    return _made("mp4", build)


def webm_vp9_opus() -> bytes:
    def build(c):
        video, audio = _video(c, "libvpx-vp9"), _audio(c, "libopus")
        _write_video(c, video, 20)
        _write_audio(c, audio, 2)

    return _made("webm", build)


def m4a_aac() -> bytes:
    return _made("ipod", lambda c: _write_audio(c, _audio(c, "aac"), 2))


def mp3() -> bytes:
    return _made("mp3", lambda c: _write_audio(c, _audio(c, "libmp3lame", 44100), 2))


def ogg_opus() -> bytes:
    return _made("ogg", lambda c: _write_audio(c, _audio(c, "libopus"), 2))


def wav_pcm() -> bytes:
    return _made("wav", lambda c: _write_audio(c, _audio(c, "pcm_s16le", 8000), 2))


def mp4_4_hours() -> bytes:
    # Four hours at one frame a minute: 241 tiny frames, a real 4-hour timeline.
    def build(c):
        video = _video(c, "libx264", rate=1)
        _write_video(c, video, 241, step=60)  # pts in seconds (time base 1/rate)

    return _made("mp4", build)


def mp4_frame_8200x4400() -> bytes:
    # One flat frame of 8200x4400 (36 Mpx, over 8K UHD's 33.2 Mpx): a few KB of H.264.
    def build(c):
        video = _video(c, "libx264", rate=1, width=8200, height=4400, preset="ultrafast")
        _write_video(c, video, 1, image=Image.new("RGB", (8200, 4400), GREEN))

    return _made("mp4", build)


def mp4_truncated() -> bytes:
    # mp4_h264_aac cut in half: its moov (at the end) is gone.
    data = mp4_h264_aac()
    return data[: len(data) // 2]


def mp4_8s_faststart() -> bytes:
    # 8 s of H.264 + AAC with its moov first. Not a corpus file: the whole of the one below.
    def build(c):
        video, audio = _video(c, "libx264"), _audio(c, "aac")
        _write_video(c, video, 80)
        _write_audio(c, audio, 8)

    return _made("mp4", build, movflags="faststart")


def mp4_cut_after_moov() -> bytes:
    # mp4_8s_faststart cut halfway through its media data: the headers still declare 8 s,
    # the sample tables point past the end, the packets end near 3 s.
    data = mp4_8s_faststart()
    mdat = data.find(b"mdat")
    assert 0 < data.find(b"moov") < mdat
    return data[: (mdat + len(data)) // 2]


def webm_h264_bframes() -> bytes:
    # H.264 with B-frames (x264's default of 3) and AAC in a file whose EBML DocType says WebM:
    # the webm muxer refuses H.264, so its copy is Matroska, and Matroska stores no DTS.
    # FFmpeg writes "matroska"; the DocType is rewritten in place to "webm" plus a 4-byte Void.
    def build(c):
        video, audio = _video(c, "libx264", bf="3"), _audio(c, "aac")
        _write_video(c, video, 20)
        _write_audio(c, audio, 2)

    made = _made("matroska", build)
    doc_type = b"\x42\x82\x88matroska"
    assert made.count(doc_type) == 1
    return made.replace(doc_type, b"\x42\x82\x84webm" + b"\xec\x82\x00\x00")


def mp4_lying_duration() -> bytes:
    # Ten minutes at one frame a second, whose mvhd/tkhd/mdhd durations all say 1 s.
    def build(c):
        video = _video(c, "libx264", rate=1)
        _write_video(c, video, 600)

    data = bytearray(_made("mp4", build))
    for box, version_offset in ((b"mvhd", 8), (b"mdhd", 8), (b"tkhd", 8)):
        pos = data.find(box)
        while pos != -1:
            start = pos - 4
            assert data[start + version_offset] == 0  # version 0: 32-bit fields
            if box == b"tkhd":
                timescale = struct.unpack(">I", data[data.find(b"mvhd") + 16 : data.find(b"mvhd") + 20])[0]
                struct.pack_into(">I", data, start + 28, timescale)
            else:
                timescale = struct.unpack(">I", data[start + 20 : start + 24])[0]
                struct.pack_into(">I", data, start + 24, timescale)
            pos = data.find(box, pos + 4)
    return bytes(data)


def webm_64_streams() -> bytes:
    # One video and 63 audio tracks (a few packets each).
    def build(c):
        video = _video(c, "libvpx-vp9")
        tracks = [_audio(c, "libopus") for _ in range(63)]
        _write_video(c, video, 2)
        for track in tracks:
            _write_audio(c, track, 0.1)

    return _made("webm", build)


def mp4_mpeg4_part2() -> bytes:
    # MPEG-4 Part 2 (DivX era): a real video codec, not on the allowlist.
    def build(c):
        _write_video(c, _video(c, "mpeg4"), 10)

    return _made("mp4", build)


FILES = {
    "video_h264_aac.mp4": mp4_h264_aac,
    "video_faststart.mp4": mp4_faststart,
    "video_rotated.mov": mov_rotated,
    "video_vp9_opus.webm": webm_vp9_opus,
    "video_hevc.mp4": mp4_hevc,
    "audio_aac.m4a": m4a_aac,
    "audio.mp3": mp3,
    "audio_opus.ogg": ogg_opus,
    "audio_pcm.wav": wav_pcm,
    "video_4_hours.mp4": mp4_4_hours,
    "video_8200x4400.mp4": mp4_frame_8200x4400,
    "video_truncated.mp4": mp4_truncated,
    "video_lying_duration.mp4": mp4_lying_duration,
    "video_cut_after_moov.mp4": mp4_cut_after_moov,
    "video_h264_bframes.webm": webm_h264_bframes,
    "video_64_streams.webm": webm_64_streams,
    "video_mpeg4_part2.mp4": mp4_mpeg4_part2,
    "video_hevc_location_rotated.mov": mov_hevc_location_rotated,
    "video_h264_aac_location.mp4": mp4_h264_aac_location,
}


def main(names: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, make in FILES.items():
        if names and name not in names:
            continue
        data = make()
        (OUT / name).write_bytes(data)
        print(f"generated/{name}\t{len(data)}\t{hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main(sys.argv[1:])
