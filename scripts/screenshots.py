#!/usr/bin/env python
"""Regenerate the README screenshots: docs/dashboard.png, docs/upload-page.png, docs/console-list.png,
docs/console-video.png.

Runs the embedded defaults in a throwaway data directory (fresh SQLite, local
storage, in-process broker and worker, YARA only), serves Airlock on a free
loopback port in this process, feeds it real uploads through the HTTP API,
and drives Debian's Chromium with Playwright for the pictures.

The dashboard's history is demo data: the uploads are processed for real,
then their timestamps are spread over the last day so the chart has a shape.

Usage: .venv/bin/python scripts/screenshots.py [--out docs] [--keep]
Needs: the [test] extra (playwright, requests) and `apt-get install chromium`.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "screenshots-only-password"
PICTURES = ("dashboard.png", "upload-page.png", "console-list.png", "console-video.png")


def configure(data_dir: Path) -> None:
    """Embedded defaults in `data_dir`; must run before Django is imported."""
    for name in (
        "DATABASE_URL",
        "REDIS_URL",
        "RABBITMQ_URL",
        "CLAMD_SOCKET",
        "CLAMD_HOST",
        "AIRLOCK_STORAGE",
        "AIRLOCK_PUBLIC_URL",
    ):
        os.environ.pop(name, None)
    os.environ["AIRLOCK_DATA_DIR"] = str(data_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.base"
    os.environ.setdefault("AIRLOCK_LOG_LEVEL", "WARNING")
    sys.path.insert(0, str(ROOT))
    from tests.support.env import with_group_keys

    with_group_keys(os.environ, "AIRLOCK_RETRIES", base_seconds=0.2, max_seconds=0.5)


# --- sample files ---------------------------------------------------------------


def photo(width: int, height: int, seed: int) -> bytes:
    """A small 'photo': a two-colour gradient with a sun and hills, as JPEG."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    top = tuple(rng.randint(40, 200) for _ in range(3))
    bottom = tuple(rng.randint(120, 255) for _ in range(3))
    image = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(image)
    for y in range(height):
        t = y / max(1, height - 1)
        draw.line([(0, y), (width, y)], fill=tuple(int(a + (b - a) * t) for a, b in zip(top, bottom)))
    r = height // 6
    cx, cy = rng.randint(r, width - r), rng.randint(r, height // 2)
    draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=(255, 214, 90))
    for i in range(3):
        base = height - i * height // 8
        shade = tuple(max(0, c - 60 - i * 20) for c in bottom)
        draw.polygon(
            [
                (0, height),
                (0, base - height // 5),
                (width // 3, base - height // 3),
                (2 * width // 3, base - height // 6),
                (width, base - height // 4),
                (width, height),
            ],
            fill=shade,
        )
    buf = io.BytesIO()
    image.save(buf, "JPEG", quality=85)
    return buf.getvalue()


def diagram_png(width: int, height: int) -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (width, height), (250, 250, 252))
    draw = ImageDraw.Draw(image)
    colors = [(37, 99, 235), (22, 163, 74), (220, 38, 38), (245, 158, 11)]
    for i, color in enumerate(colors):
        x = 20 + i * (width - 40) // 4
        h = (i + 2) * height // 7
        draw.rectangle([x, height - 20 - h, x + (width - 40) // 5, height - 20], fill=color)
    buf = io.BytesIO()
    image.save(buf, "PNG")
    return buf.getvalue()


def clip(width: int, height: int, frames: int = 60) -> bytes:
    """A short H.264 MP4 (PyAV, as the media tests make theirs): a sun crossing a dusk sky."""
    import av
    from PIL import Image, ImageDraw

    background = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(background)
    for y in range(height):
        t = y / max(1, height - 1)
        draw.line([(0, y), (width, y)], fill=(int(40 + 180 * t), int(50 + 90 * t), int(110 - 40 * t)))
    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        r = height // 7
        for i in range(frames):
            frame = background.copy()
            cx, cy = width // 6 + i * (2 * width // 3) // frames, height // 3 + abs(frames // 2 - i) * 2
            ImageDraw.Draw(frame).ellipse([cx - r, cy - r, cx + r, cy + r], fill=(255, 214, 90))
            for packet in stream.encode(av.VideoFrame.from_image(frame)):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return buf.getvalue()


# --- the server ------------------------------------------------------------------


def start_server():
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
    from django.core.wsgi import get_wsgi_application

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, format, *args):
            return

    server = ThreadedWSGIServer(("127.0.0.1", 0), QuietHandler, allow_reuse_address=False)
    server.daemon_threads = True
    server.set_app(StaticFilesHandler(get_wsgi_application()))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    return server, f"http://localhost:{server.server_address[1]}"


def create_user(name: str, tenant: str, *, moderator: bool = False) -> str:
    from django.core.management import call_command

    out = io.StringIO()
    call_command(
        "createuser", name, tenant=tenant, moderator=moderator, platform=moderator, password=PASSWORD, stdout=out
    )  # the dashboard picture shows every tenant
    return out.getvalue().strip().splitlines()[-1]


def wait_terminal(ids: list[str], timeout: float = 90.0) -> None:
    from attachments.models import Attachment

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = Attachment.objects.filter(pk__in=ids, status__in=["pending", "processing"]).count()
        if not left:
            return
        time.sleep(0.2)
    raise SystemExit(f"{left} uploads still not processed after {timeout}s")


def seed(base_url: str, token: str) -> None:
    """Real uploads through the API, a flaky scanner for one of them, then history spread over a day."""
    import requests
    from django.conf import settings
    from django.utils import timezone

    from attachments.models import Attachment, TransitionLog
    from processing import pipeline
    from processing.scanners import ScannerError

    real_scan = pipeline.WORK["scan"]

    def flaky_scan(attachment):
        if attachment.filename.startswith("scanner-timeout"):
            raise ScannerError("clamd: timed out after 120 s")
        return real_scan(attachment)

    settings.AIRLOCK_RETRIES = settings.AIRLOCK_RETRIES.replace(max_attempts=2)
    pipeline.WORK["scan"] = flaky_scan

    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    rng = random.Random(7)
    samples: list[tuple[str, str, bytes, str]] = []
    for i in range(36):
        samples.append(
            ("image", f"IMG_{4100 + i}.jpg", photo(rng.randint(300, 900), rng.randint(300, 700), i), "image/jpeg")
        )
    for i in range(5):
        samples.append(("image", f"screenshot-{i}.jpg", b"<html>not an image</html>" * 20, "image/jpeg"))
    samples.append(("image", "scanner-timeout.jpg", photo(200, 200, 99), "image/jpeg"))
    samples.append(("media", "first-dance.mp4", clip(640, 360), "video/mp4"))
    ids = []
    for profile, filename, data, content_type in samples:
        intent = session.post(
            f"{base_url}/api/v1/uploads",
            json={"profile": profile, "filename": filename, "size": len(data), "content_type": content_type},
        ).json()
        upload = intent["upload"]
        response = requests.put(upload["url"], data=data, headers=upload["headers"])
        response.raise_for_status()
        ids.append(intent["id"])
    wait_terminal(ids)
    pipeline.WORK["scan"] = real_scan

    # Spread the history over the last day; the newest quarter stays in the last hour.
    now = timezone.now()
    rows = list(Attachment.objects.filter(pk__in=ids).order_by("created_at"))
    for index, attachment in enumerate(rows):
        if index >= len(rows) * 3 // 4:
            shift = timedelta(minutes=rng.randint(1, 40))
        else:
            shift = timedelta(hours=rng.triangular(1, 23.5, 9))
        extra = timedelta(seconds=rng.uniform(0.2, 6.0))  # a little queueing time before processing
        Attachment.objects.filter(pk=attachment.pk).update(
            created_at=attachment.created_at - shift - extra,
            uploaded_at=(attachment.uploaded_at - shift - extra) if attachment.uploaded_at else None,
            ready_at=(attachment.ready_at - shift) if attachment.ready_at else None,
        )
        for log in TransitionLog.objects.filter(attachment=attachment):
            TransitionLog.objects.filter(pk=log.pk).update(created_at=log.created_at - shift)
    # The wedding a support ticket names: the video and a few photos share its ref (the console's pictures).
    wedding = [
        a.pk
        for a in rows
        if a.filename == "first-dance.mp4" or a.filename in ("IMG_4101.jpg", "IMG_4102.jpg", "IMG_4103.jpg")
    ]
    Attachment.objects.filter(pk__in=wedding).update(ref="wedding:smith-2026")
    Attachment.objects.filter(pk__in=[a.pk for a in rows if a.filename == "IMG_4104.jpg"]).update(
        ref="wedding:smithers-2024"
    )
    # One upload whose worker vanished mid-way: stuck past its lease.
    stuck = rows[0]
    Attachment.objects.filter(pk=stuck.pk).update(
        status="processing", step="derive", lease_expires_at=now - timedelta(minutes=12)
    )


# --- the pictures ----------------------------------------------------------------


def sign_in(page, base_url: str, username: str, next_url: str) -> None:
    page.goto(f"{base_url}/admin/login/?next={next_url}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_load_state("networkidle")


def shoot(base_url: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    from tests.support.browser import CHROMIUM, launch_chromium  # the browser tests' launch

    if not Path(CHROMIUM).exists():
        raise SystemExit(f"Chromium not found at {CHROMIUM}: apt-get install chromium")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # the ORM is not used from Playwright's loop here
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)

        context = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
        page = context.new_page()
        sign_in(page, base_url, "moderator", "/admin/dashboard/")
        page.goto(f"{base_url}/admin/dashboard/")
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(out / "dashboard.png"), full_page=True)

        # The console as support uses it: one search by the ticket's ref, then the video's page.
        page.goto(f"{base_url}/admin/attachments/attachment/?q=ref%3Awedding%3Asmith")
        page.wait_for_function(
            "() => [...document.querySelectorAll('img.airlock-list-thumb')]"
            ".every(img => img.complete && img.naturalWidth > 0)",
            timeout=30_000,
        )
        page.screenshot(path=str(out / "console-list.png"), full_page=True)
        page.click("#result_list a:text('first-dance.mp4')")
        page.wait_for_selector(".field-preview video")
        page.set_viewport_size({"width": 1280, "height": 1500})  # the top: status, player, download, facts
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(1500)  # the poster painted, the player's loading spinner gone
        page.screenshot(path=str(out / "console-video.png"))
        context.close()

        context = browser.new_context(viewport={"width": 960, "height": 720}, device_scale_factor=1)
        page = context.new_page()
        sign_in(page, base_url, "dana", "/")
        page.wait_for_selector("#profile:enabled")
        page.select_option("#profile", "auto")  # each file to the profile for its type
        page.set_input_files(
            "#dashboard input.uppy-Dashboard-input >> nth=0",
            [
                {"name": "lake-at-dawn.jpg", "mimeType": "image/jpeg", "buffer": photo(1600, 1200, 3)},
                {"name": "floor-plan.png", "mimeType": "image/png", "buffer": diagram_png(900, 600)},
                {"name": "holiday.jpg", "mimeType": "image/jpeg", "buffer": photo(1200, 900, 11)},
                {"name": "totally-a-photo.jpg", "mimeType": "image/jpeg", "buffer": b"MZ\x90\x00 not an image" * 40},
            ],
        )
        page.wait_for_function(
            "() => [...document.querySelectorAll('#items li.item')].every("
            "li => ['ready', 'rejected', 'failed', 'error'].includes(li.dataset.status))",
            timeout=90_000,
        )
        page.wait_for_function(
            "() => [...document.querySelectorAll('#items li.item[data-status=ready] .thumb img')]"
            ".every(img => img.complete && img.naturalWidth > 0)",
            timeout=30_000,
        )
        page.fill("#ref", "listing:42")
        page.screenshot(path=str(out / "upload-page.png"), full_page=True)
        context.close()
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs"))
    parser.add_argument("--keep", action="store_true", help="keep the throwaway data directory")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="airlock-screenshots-"))
    configure(data_dir)
    try:
        import django

        django.setup()
        from django.core.management import call_command

        from ops.runtime import start_worker

        call_command("migrate", verbosity=0)
        token = create_user("dana", "acme")
        create_user("moderator", "staff", moderator=True)
        worker = start_worker(threads=2)
        server, base_url = start_server()
        try:
            seed(base_url, token)
            shoot(base_url, out)
        finally:
            server.shutdown()
            worker.stop(timeout=5000)
        print(f"wrote {', '.join(str(out / name) for name in PICTURES)}")
    finally:
        if args.keep:
            print(f"data kept in {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
