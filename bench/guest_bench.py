#!/usr/bin/env python
"""Guests of one upload link on PostgreSQL + Redis: a burst of 200 guests x 5 photos, and the link page's first paint.

    python bench/guest_bench.py [--quick] [--guests 200] [--photos 5] [--clients 50]

`manage.py serve` with its default sizing on a scratch PostgreSQL database + Redis
(+ clamd when it answers), local storage, the guests' limits as shipped (intents per
minute and pending uploads per subject at their defaults, not the benches' unlimited).
A host (service token) makes one link; then every guest does what the link page does,
on a session of its own (its own cookie jar, starting with no cookie):

  GET /l/<id>                       the page: the airlock_guest cookie and the client token in it
  GET /api/v1/profiles              what the page asks first
  per photo: POST /api/v1/tus/ (Upload-Metadata profile, filename, content_type), PATCH the bytes
  GET /api/v1/attachments?ids=…&wait=10   until each photo is ready, rejected or failed

Busy answers are handled as the page handles them (attachments/static/airlock/upload.js):
429 and 503 wait for their Retry-After (Uppy's queue is paused that long), 409/423 and
dropped connections wait tus-js-client's retryDelays, and a request is given up after
ten retries, as tus-js-client gives up with the page's retryDelays; the waiting GET retries every
max(2 s, Retry-After) without end (bounded here by --deadline). Each guest sends its
photos one after another (the page sends up to four at once); --clients guests run at
once (a 2-core box), all released together.

  guest_burst_ok_ratio          photos that end ready / photos sent (goal 1.0)
  guest_burst.responses_5xx     5xx answers seen, retried or not (goal 0)
  guest_burst.unretried_429     429s after which a request was given up (goal 0)
  guest_burst.retried_429/_503  busy answers the guests waited out by Retry-After (info)
  guest_page_load_s             median first contentful paint of the link page in Chromium at 390 x 844 (goal < 1 s)

--quick: 40 guests, 640 x 480 photos, 3 page loads. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.api import Database  # noqa: E402
from bench.common import createuser, emit, median, migrate, percentile, r, scratch_dir, serve, small_jpeg  # noqa: E402
from bench.serve_bench import redis_ok, service_env  # noqa: E402

TUS = {"Tus-Resumable": "1.0.0"}
# tus-js-client's retryDelays as the page sets them: a request is given up after this many retries.
RETRY_DELAYS = [0.0, 1.0, 3.0, 5.0, 10.0, 10.0, 15.0, 15.0, 20.0, 30.0]
TOKEN = re.compile(r'name="airlock-guest-token" content="([^"]+)"')
TERMINAL = {"ready", "rejected", "failed"}


class Tally:
    """Every answer the guests saw, and what they did about the busy ones."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statuses: dict[int, int] = {}
        self.retried = {"429": 0, "503": 0, "other": 0}
        self.given_up: dict[str, int] = {}
        self.outcomes: dict[str, int] = {}
        self.ttr: list[float] = []
        self.retry_after_s: list[float] = []

    def answer(self, status: int) -> None:
        with self.lock:
            self.statuses[status] = self.statuses.get(status, 0) + 1

    def bump(self, table: dict[str, int], key: str) -> None:
        with self.lock:
            table[key] = table.get(key, 0) + 1


def retry_after(response) -> float | None:
    if response.status_code not in (429, 503):
        return None
    try:
        return max(0.0, min(float(response.headers.get("Retry-After", "")), 300.0))
    except ValueError:
        return None


def call(session, tally: Tally, method: str, url: str, *, retries: int = len(RETRY_DELAYS), **kwargs):
    """One request as the page sends it, with the page's retries; the last answer, or None if none came."""
    import requests

    attempt = 0
    while True:
        try:
            response = session.request(method, url, timeout=120, **kwargs)
        except requests.RequestException:
            response = None
        if response is not None:
            tally.answer(response.status_code)
            busy = response.status_code in (429, 503)
            if not (busy or response.status_code in (409, 423) or response.status_code >= 500):
                return response
        if attempt >= retries:
            key = "connection" if response is None else str(response.status_code)
            tally.bump(tally.given_up, key)
            return response
        wait = retry_after(response) if response is not None else None
        if wait is not None:
            tally.bump(tally.retried, str(response.status_code))
            with tally.lock:
                tally.retry_after_s.append(wait)
        else:
            tally.bump(tally.retried, "other")
            wait = RETRY_DELAYS[attempt]
        time.sleep(max(wait, 0.5 if response is not None and response.status_code in (429, 503) else 0.0))
        attempt += 1


def metadata(**values: str) -> str:
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in values.items())


def send_photo(session, tally: Tally, base: str, auth: dict, name: str, data: bytes) -> str | None:
    """tus as Uppy does it: create, then PATCH (after a failed PATCH: HEAD for the offset, PATCH the rest)."""
    created = call(
        session,
        tally,
        "POST",
        f"{base}/api/v1/tus/",
        headers={
            **auth,
            **TUS,
            "Upload-Length": str(len(data)),
            "Upload-Metadata": metadata(profile="camera", filename=name, content_type="image/jpeg"),
        },
    )
    if created is None or created.status_code != 201:
        tally.bump(tally.outcomes, f"not_created_{getattr(created, 'status_code', 'none')}")
        return None
    location = created.headers["Location"]
    offset = 0
    for _ in range(len(RETRY_DELAYS) + 1):
        patched = call(
            session,
            tally,
            "PATCH",
            location,
            retries=0,
            data=data[offset:],
            headers={
                **auth,
                **TUS,
                "Upload-Offset": str(offset),
                "Content-Type": "application/offset+octet-stream",
            },
        )
        if patched is not None and patched.status_code == 204:
            return location.rstrip("/").rsplit("/", 1)[-1]
        head = call(session, tally, "HEAD", location, headers={**auth, **TUS})
        if head is None or head.status_code != 200:
            break
        offset = int(head.headers["Upload-Offset"])
        if offset == len(data):
            return location.rstrip("/").rsplit("/", 1)[-1]
    tally.bump(tally.outcomes, "not_sent")
    return None


def guest(base: str, link_url: str, photos: list[bytes], tally: Tally, start: threading.Event, deadline: float):
    import requests

    start.wait()
    with requests.Session() as session:
        page = call(session, tally, "GET", link_url)
        found = TOKEN.search(page.text) if page is not None and page.status_code == 200 else None
        if found is None or "airlock_guest" not in session.cookies:
            for _ in photos:
                tally.bump(tally.outcomes, f"no_page_{getattr(page, 'status_code', 'none')}")
            return
        auth = {"Authorization": f"Bearer {found.group(1)}"}
        call(session, tally, "GET", f"{base}/api/v1/profiles", headers=auth)
        sent: dict[str, float] = {}
        for i, data in enumerate(photos):
            pk = send_photo(session, tally, base, auth, f"IMG_{i:04d}.JPG", data)
            if pk is not None:
                sent[pk] = time.monotonic()
        while sent and time.monotonic() < deadline:
            answer = call(
                session,
                tally,
                "GET",
                f"{base}/api/v1/attachments",
                retries=10**6,
                params={"ids": ",".join(sent), "wait": "10"},
                headers=auth,
            )
            if answer is None or answer.status_code != 200:
                time.sleep(2)
                continue
            for resource in answer.json()["results"]:
                if resource["status"] in TERMINAL and resource["id"] in sent:
                    began = sent.pop(resource["id"])
                    tally.bump(tally.outcomes, resource["status"])
                    if resource["status"] == "ready":
                        with tally.lock:
                            tally.ttr.append(time.monotonic() - began)
        for _ in sent:
            tally.bump(tally.outcomes, "not_settled_by_deadline")


def unique_photos(guests: int, per_guest: int, size: tuple[int, int]) -> list[list[bytes]]:
    """Every photo its own bytes (no duplicates), made before the clock starts: a few camera-like scenes
    (bench/common.photo_jpeg is slow to make), each copy marked with a block of its own and encoded anew."""
    import io

    from PIL import Image, ImageDraw

    scenes = [Image.open(io.BytesIO(small_jpeg(10_000 + n, size))).convert("RGB") for n in range(8)]
    out: list[list[bytes]] = []
    for g in range(guests):
        mine = []
        for i in range(per_guest):
            n = g * per_guest + i
            image = scenes[n % len(scenes)].copy()
            ImageDraw.Draw(image).rectangle(
                [16, 16, 16 + 8 * (n % 40 + 1), 24 + n // 40], fill=(n * 37 % 256, n * 91 % 256, n * 53 % 256)
            )
            buf = io.BytesIO()
            image.save(buf, "JPEG", quality=85)
            mine.append(buf.getvalue())
        out.append(mine)
    return out


def first_paint(link_url: str, loads: int) -> dict:
    """The link page's first contentful paint in Chromium at 390 x 844, a fresh context (no cookie, no cache) each."""
    from playwright.sync_api import sync_playwright

    from tests.support.browser import launch_chromium

    script = """() => new Promise((resolve) => {
        const pick = () => {
            const fcp = performance.getEntriesByName("first-contentful-paint")[0];
            const fp = performance.getEntriesByName("first-paint")[0];
            return fcp ? ["first-contentful-paint", fcp.startTime] : fp ? ["first-paint", fp.startTime] : null;
        };
        const now = pick();
        if (now) { resolve(now); return; }
        new PerformanceObserver(() => { const got = pick(); if (got) resolve(got); })
            .observe({ type: "paint", buffered: true });
        setTimeout(() => resolve(pick()), 10000);
    })"""
    seconds: list[float] = []
    kinds: set[str] = set()
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            for _ in range(loads + 1):  # the first load warms the server's and the OS's caches: not counted
                context = browser.new_context(
                    viewport={"width": 390, "height": 844}, device_scale_factor=3, is_mobile=True, has_touch=True
                )
                page = context.new_page()
                response = page.goto(link_url, wait_until="load")
                if response is None or response.status != 200:
                    raise RuntimeError(f"the link page answered {getattr(response, 'status', None)}")
                got = page.evaluate(script)
                context.close()
                if got is None:
                    raise RuntimeError("Chromium reported no paint timing for the link page")
                kinds.add(got[0])
                seconds.append(got[1] / 1000)
        finally:
            browser.close()
    counted = seconds[1:]
    return {"median_s": median(counted), "max_s": max(counted), "loads": len(counted), "entry": sorted(kinds)}


def main() -> None:
    import requests

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--guests", type=int, default=None)
    parser.add_argument("--photos", type=int, default=5)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--deadline", type=float, default=1800, help="seconds the burst may take in all")
    args = parser.parse_args()
    guests = args.guests or (40 if args.quick else 200)
    size = (640, 480) if args.quick else (1024, 768)
    loads = 3 if args.quick else 7

    tmp = scratch_dir("airlock-bench-guests-")
    db = Database(tmp)
    if not (db.pg and redis_ok()):
        db.drop()
        raise SystemExit("the guest bench needs PostgreSQL and Redis")
    photos = unique_photos(guests, args.photos, size)
    server = None
    try:
        # The guests' limits as shipped: embedded_env lifts them for the other benches.
        env = service_env(tmp, db, AIRLOCK_RATE_LIMITS={"intents_per_minute": None, "pending_per_subject": None})
        migrate(env)
        host_token = createuser(env, "couple", tenant="wedding")
        server = serve(env, tmp)
        base = server.base
        made = requests.post(
            f"{base}/api/v1/upload-links",
            json={
                "ref": "wedding:bench",
                "title": "Anna & Ben",
                "expires_at": (datetime.now(UTC) + timedelta(days=1)).isoformat(),
            },
            headers={"Authorization": f"Token {host_token}"},
            timeout=60,
        )
        made.raise_for_status()
        link_url = made.json()["url"]

        paint = first_paint(link_url, loads)

        tally = Tally()
        start = threading.Event()
        load_before = os.getloadavg()
        deadline = time.monotonic() + args.deadline
        began = time.monotonic()
        with ThreadPoolExecutor(max_workers=args.clients) as pool:
            futures = [pool.submit(guest, base, link_url, photos[g], tally, start, deadline) for g in range(guests)]
            start.set()
            for future in futures:
                future.result()
        seconds = time.monotonic() - began
        load_after = os.getloadavg()
        listed = requests.get(
            f"{base}/api/v1/attachments",
            params={"ref": "wedding:bench", "limit": 1},
            headers={"Authorization": f"Token {host_token}"},
            timeout=60,
        )
    finally:
        if server is not None:
            server.stop()
        db.drop()

    total = guests * args.photos
    ready = tally.outcomes.get("ready", 0)
    five_xx = sum(n for status, n in tally.statuses.items() if status >= 500)
    emit(
        {
            "guest_burst_ok_ratio": r(ready / total, 4),
            "guest_page_load_s": r(paint["median_s"], 3),
            "guest_burst": {
                "guests": guests,
                "photos_per_guest": args.photos,
                "photo_px": f"{size[0]}x{size[1]}",
                "clients": args.clients,
                "files": total,
                "ready": ready,
                "outcomes": dict(sorted(tally.outcomes.items())),
                "responses_5xx": five_xx,
                "unretried_429": tally.given_up.get("429", 0),
                "given_up": dict(sorted(tally.given_up.items())),
                "retried_429": tally.retried["429"],
                "retried_503": tally.retried["503"],
                "retried_other": tally.retried["other"],
                "retry_after_max_s": max(tally.retry_after_s) if tally.retry_after_s else None,
                "statuses": {str(k): v for k, v in sorted(tally.statuses.items())},
                "seconds": r(seconds, 1),
                "files_per_s": r(total / seconds, 2),
                "ttr_p50_s": r(percentile(tally.ttr, 50), 2) if tally.ttr else None,
                "ttr_p99_s": r(percentile(tally.ttr, 99), 2) if tally.ttr else None,
                "ref_listing_status": listed.status_code,
                "scanner": "clamd" if env.get("CLAMD_SOCKET") else "yara (clamd did not answer)",
                "load_before": [round(x, 2) for x in load_before],
                "load_after": [round(x, 2) for x in load_after],
                "setup": "serve defaults on PostgreSQL + Redis (+ clamd when it answers), local storage, camera "
                "profile; each guest its own cookie jar: page, profiles, tus create + PATCH per photo, waiting GET",
            },
            "guest_page_load": {
                "max_s": r(paint["max_s"], 3),
                "loads": paint["loads"],
                "entry": paint["entry"],
                "viewport": "390x844 @3x, is_mobile, fresh context per load, first load not counted",
            },
        }
    )


if __name__ == "__main__":
    main()
