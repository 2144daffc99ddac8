"""Preload and warm up the fork server once, so jobs forked from it start hot.

Importing Pillow/pypdf/PDFium per job would be slow; so would the
lazy work they do on first use (plugin registration, codec set-up, PDFium init,
pypdf's filters). Paying both here, in the server, makes every job a copy-on-write
fork of an already warm interpreter.
"""

from __future__ import annotations

import gc
import importlib
import io
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

PRELOAD = (
    "PIL.Image",
    "PIL.JpegImagePlugin",
    "PIL.PngImagePlugin",
    "PIL.GifImagePlugin",
    "PIL.WebPImagePlugin",
    "PIL.MpoImagePlugin",
    "PIL.AvifImagePlugin",
    "pillow_heif",  # HEIC/HEIF: its libheif/libde265 are mapped here, before any confinement
    "av",  # video/audio: FFmpeg's libraries (in the wheel) too
    "processing.sandbox.transcode",  # a video's web rendition (libx264, AAC)
    "pypdf",
    "pypdfium2",
    "zipfile",
    "bz2",
    "lzma",
    "inflate64",  # Deflate64 ZIP members
)


def _encoded(image: object, fmt: str) -> bytes:
    buf = io.BytesIO()
    image.save(buf, fmt)  # type: ignore[attr-defined]
    return buf.getvalue()


def _encoded_in_child(image: object, fmt: str) -> bytes:
    """Encode in a forked child: the HEVC/AV1 encoders (x265, aom) only make our samples,
    and their pages, once touched here, would be resident in every job (+4 MB RSS each)."""
    return _made_in_child(lambda: _encoded(image, fmt), fmt)


def _video_sample() -> bytes:
    """A tiny H.264 + AAC MP4 (8 frames of 64x48), made with FFmpeg's encoders."""
    import av
    from PIL import Image

    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as container:
        video = container.add_stream("libx264", rate=8, options={"threads": "1"})
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        audio = container.add_stream("aac", rate=48000)
        for i in range(8):
            frame = av.VideoFrame.from_image(Image.new("RGB", (64, 48), (i * 30, 90, 160)))
            frame.pts = i
            container.mux(video.encode(frame))
        container.mux(video.encode())
        samples = av.AudioFrame(format=audio.format.name, layout=audio.layout.name, samples=1024)
        for plane in samples.planes:
            plane.update(bytes(plane.buffer_size))
        samples.sample_rate, samples.pts = 48000, 0
        container.mux(audio.encode(samples))
        container.mux(audio.encode())
    return buf.getvalue()


def _made_in_child(make: Callable[[], bytes], what: str) -> bytes:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            os.close(read_fd)
            with os.fdopen(write_fd, "wb") as out:
                out.write(make())
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as result:
        data = result.read()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise RuntimeError(f"encoding the {what} warm-up sample failed (status {status})")
    return data


def warm_up() -> None:
    """Run every decoder once on tiny generated files."""
    from PIL import Image
    from pypdf import PdfWriter

    from . import archives, images, media, pdfs
    from .limits import Bounds

    with tempfile.TemporaryDirectory() as tmp:
        work, src = Path(tmp), Path(tmp) / "input"
        sample = Image.effect_mandelbrot((640, 480), (-2.2, -1.2, 1.0, 1.2), 64).convert("RGB")
        for fmt in ("JPEG", "PNG", "GIF", "WEBP"):
            src.write_bytes(_encoded(sample, fmt))
            images.process(src, work, Bounds())
        small = sample.resize((128, 96))  # HEVC/AV1 encoders are slower: a small sample (~0.1 s)
        for fmt in ("HEIF", "AVIF"):  # pillow-heif's and Pillow's own plugin
            src.write_bytes(_encoded_in_child(small, fmt))
            images.process(src, work, Bounds())
        src.write_bytes(_made_in_child(_video_sample, "MP4"))  # the demuxer, H.264 decoder, swscale
        media.process(src, work, Bounds())
        tiny = sample.resize((128, 96))
        for fmt in ("JPEG", "PNG"):  # small enough that JPEG draft mode and reduce() run
            images.render(_encoded(tiny, fmt), Bounds(thumbnail_size=32))
        writer = PdfWriter()
        writer.add_blank_page(72, 72)
        buf = io.BytesIO()
        writer.write(buf)
        src.write_bytes(buf.getvalue())
        pdfs.process(src, work, Bounds())
        with zipfile.ZipFile(src, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("a.txt", b"warm")
        archives.process(src, work, Bounds())


def _import_codecs() -> None:
    # Text in PDFs names any codec (pypdf decodes ToUnicode maps as UTF-16-BE, fonts as
    # cp1252...): a job that dropped its uid or is under Landlock may be unable to read
    # the standard library to import one later (a pyenv Python under /root, for one).
    import encodings
    import pkgutil

    for module in pkgutil.iter_modules(encodings.__path__):
        try:
            importlib.import_module(f"encodings.{module.name}")
        except Exception:  # noqa: BLE001 - platform-specific codecs (mbcs, cp65001)
            continue


def preload() -> None:
    """Import and warm every decoder in the server, before any job is forked.

    warm_up() makes a photo job about a fifth faster for under a second more at the
    server's start (bench/tricks_bench.py measures it with and without). The spares
    forked from the server share the warm heap; they do not warm up again.
    """
    for name in PRELOAD:
        importlib.import_module(name)
    _import_codecs()
    from PIL import Image

    Image.init()  # register every plugin now, so Image.open never imports more in a job
    warm_up()
    gc.collect()
    gc.freeze()  # keep the preloaded heap shared copy-on-write with every job
