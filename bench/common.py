"""Shared pieces of the benchmarks: statistics, machine facts, Django in a scratch directory, sample files.

Every benchmark module under bench/ runs as its own process (bench/run.py starts
them), sets Django up against a temporary AIRLOCK_DATA_DIR with bench_django(),
and prints one JSON object on its last stdout line.
"""

from __future__ import annotations

import io
import json
import math
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support import pdf_document  # noqa: E402  (the same PDF writer the tests use)
from tests.support.env import EnvExtra, update_env, with_group_keys  # noqa: E402, F401  (benches import them from here)
from tests.support.processes import free_port, wait_healthy, wait_settled  # noqa: E402, F401  (benches import them from here)

DEFAULT_CLAMD_SOCKET = "/tmp/airlock-clamd/clamd.sock"


# --- statistics ----------------------------------------------------------------


def median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


def percentile(values: Iterable[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty sample."""
    data = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(data)))
    return float(data[rank - 1])


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def paired_rounds(
    methods: dict[str, Callable[[Path], object]],
    inputs: list[Path],
    rounds: int,
    *,
    settle: float = 0.02,
    seed: int = 27,
) -> dict[str, list[float]]:
    """Mean seconds per input of each method, per round; the methods run in shuffled order on each input.

    Shuffled and interleaved so a noisy neighbour hits every method alike: the ratios stay fair.
    """
    for path in inputs:  # warm every method once
        for fn in methods.values():
            fn(path)
    rng = random.Random(seed)
    per_round: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(rounds):
        totals = dict.fromkeys(methods, 0.0)
        for path in inputs:
            names = list(methods)
            rng.shuffle(names)
            for name in names:
                time.sleep(settle)
                totals[name] += timed(lambda: methods[name](path))
        for name, total in totals.items():
            per_round[name].append(total / len(inputs))
    return per_round


def r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)


# --- machine -------------------------------------------------------------------


def inflate_like_the_sandbox() -> None:
    """Re-exec this process so it loads the zlib the sandbox's decoders load.

    With scripts/build-zlib-ng.sh's build present the jobs inflate with zlib-ng
    (processing/sandbox/runner.py). A baseline of "the same steps, called
    directly" must decode with the same library, or the pipeline would look
    cheaper than its own steps. Call before anything imports Pillow.
    """
    from processing.sandbox.runner import decoder_zlib_dir

    zlib_dir = decoder_zlib_dir()
    if zlib_dir is None or os.environ.get("LD_LIBRARY_PATH") == str(zlib_dir):
        return
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "LD_LIBRARY_PATH": str(zlib_dir)})


def zlib_versions() -> dict[str, str]:
    """Which zlib this process and the sandbox's jobs inflate with (starts the sandbox)."""
    import zlib

    from processing.sandbox.runner import decoder_zlib_version

    return {"this_process": zlib.ZLIB_RUNTIME_VERSION, "sandbox_jobs": decoder_zlib_version()}


def machine() -> dict[str, object]:
    model = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = (0.0, 0.0, 0.0)
    return {
        "cores": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "loadavg_at_start": [round(x, 2) for x in load],
    }


def clamd_socket() -> str | None:
    """The clamd to scan with: CLAMD_SOCKET if set, else scripts/clamd.sh's socket if it answers PONG."""
    path = os.environ.get("CLAMD_SOCKET") or DEFAULT_CLAMD_SOCKET
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            sock.connect(path)
            sock.sendall(b"zPING\0")
            return path if sock.recv(16).startswith(b"PONG") else None
    except OSError:
        return None


def embedded_env(data_dir: Path, **extra: str | dict[str, object] | None) -> dict[str, str]:
    """Environment for a child process on the embedded defaults in data_dir (SQLite, in-process broker).

    `extra` on top: None unsets a variable, a dict sets keys of a grouped variable
    (AIRLOCK_SERVE={"web_processes": 1}) and keeps the others already there."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "DATABASE_URL",
            "REDIS_URL",
            "RABBITMQ_URL",
            "CLAMD_SOCKET",
            "CLAMD_HOST",
            "CLAMD_PORT",
            "DJANGO_SETTINGS_MODULE",
        )
    }
    env.update(
        {
            "AIRLOCK_DATA_DIR": str(data_dir),
            "AIRLOCK_STORAGE_ROOT": str(data_dir / "storage"),
            "AIRLOCK_LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(REPO),
        }
    )
    with_group_keys(env, "AIRLOCK_RATE_LIMITS", intents_per_minute=10**9, pending_per_subject=10**9)
    sock = clamd_socket()
    if sock:
        env["CLAMD_SOCKET"] = sock
    return update_env(env, extra)


def local_env(tmp: Path, **extra: str | dict[str, object]) -> dict[str, str]:
    """This process's environment (its database settings included) with serve's data and local
    storage under tmp/data, and `extra` on top (as in embedded_env)."""
    env = {
        **os.environ,
        "AIRLOCK_DATA_DIR": str(tmp / "data"),
        "AIRLOCK_STORAGE_ROOT": str(tmp / "data" / "storage"),
        "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings.base"),
    }
    return update_env(env, extra)


def bench_django(settings_module: str = "config.settings.base") -> None:
    """Set Django up in this process (the environment was prepared by bench/run.py) and migrate."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", settings_module)
    import logging

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)  # a bench's own scratch database
    logging.getLogger("airlock").setLevel(logging.WARNING)


def make_user(name: str = "bench", tenant: str = "bench"):
    from django.contrib.auth import get_user_model

    from attachments.models import Membership, Tenant
    from attachments.services.tokens import api_token_issue

    tenant_obj, _ = Tenant.objects.get_or_create(slug=tenant, defaults={"name": tenant})
    user = get_user_model().objects.create_user(username=name, password=None)
    Membership.objects.create(user=user, tenant=tenant_obj)
    user.api_token = api_token_issue(user=user)
    return user


def sample_intent(user, item: dict, data: bytes):
    """What the intent view does for one of sample_mix's files (Django set up): the UploadIntent."""
    from attachments.uploads.services.intents import upload_intent_create

    return upload_intent_create(
        user=user,
        profile_name=item["profile"],
        filename=item["path"].name,
        size=len(data),
        content_type=item["content_type"],
    )


def signed_put(pk, data: bytes) -> None:
    """What the signed-PUT view does with `data` for attachment pk, in 64 KiB chunks."""
    from attachments.signing import upload_token
    from attachments.uploads.services.uploads import upload_content_receive

    upload_content_receive(
        attachment_id=pk,
        token=upload_token(pk),
        chunks=lambda: (data[i : i + 65536] for i in range(0, len(data), 65536)),
        content_length=len(data),
    )


def wait_ready(base: str, token: str, attachment_id: str, *, timeout: float = 1800, poll: int = 30) -> dict:
    """wait_settled, and a RuntimeError unless the attachment ended ready."""
    body = wait_settled(base, token, attachment_id, timeout=timeout, poll=poll)
    if body["status"] != "ready":
        raise RuntimeError(f"{attachment_id} {body['status']}: {body.get('reason')} {body.get('detail', '')}")
    return body


def scratch_dir(prefix: str) -> Path:
    """A scratch directory, inside bench/run.py's own temporary directory (removed when it ends)."""
    import tempfile

    parent = os.environ.get("BENCH_TMP")
    if parent:
        Path(parent).mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent or None))


class ServerProcess:
    """A server subprocess on a loopback port, up once it answers /healthz; its output in `log`."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path, port: int, timeout: float = 120.0) -> None:
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.log = open(log, "wb")
        self.proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        if not wait_healthy(self.base, self.proc, timeout=timeout):
            self.stop()
            raise RuntimeError(f"{argv[1:3]} did not come up: {log.read_text()[-1500:]}")

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


def stop_process(proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """SIGTERM to a child still running, SIGKILL if it has not gone after `timeout` seconds; reaped either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def migrate(env: dict[str, str]) -> None:
    """`manage.py migrate` in env's database (a child process, so env's settings hold)."""
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True, timeout=600)


def serve(env: dict[str, str], tmp: Path, *args: str) -> ServerProcess:
    """`manage.py serve` on a free loopback port with `args`, its log in tmp: the one way a bench starts it."""
    port = free_port()
    return ServerProcess(
        [sys.executable, "manage.py", "serve", "--port", str(port), *args], env, tmp / f"serve-{port}.log", port
    )


# --- S3 on moto (tests/s3 uses the same server in-process) ---------------------

AWS_BENCH_KEYS = {
    "AWS_ACCESS_KEY_ID": "airlock-bench",
    "AWS_SECRET_ACCESS_KEY": "airlock-bench-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class MotoServer:
    """moto's S3 server in a process of its own on a loopback port, one fresh bucket in it.

    Its spooled objects go under `tmp` (TMPDIR), removed with it."""

    def __init__(self, tmp: Path, bucket_prefix: str) -> None:
        port = free_port()
        self.endpoint = f"http://127.0.0.1:{port}"
        self.log = open(tmp / "moto.log", "wb")
        self.proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
            cwd=REPO,
            env={**os.environ, **AWS_BENCH_KEYS, "TMPDIR": str(tmp)},
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        client = self.client()
        deadline = time.monotonic() + 60
        while True:
            try:
                client.list_buckets()
                break
            except Exception:  # noqa: BLE001 - not listening yet
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto_server did not start: {(tmp / 'moto.log').read_text()[-1500:]}")
                time.sleep(0.2)
        self.bucket = f"{bucket_prefix}-{uuid.uuid4().hex[:8]}"
        client.create_bucket(Bucket=self.bucket)

    def client(self):
        """A boto3 S3 client of this server, with the bench's keys."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=AWS_BENCH_KEYS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=AWS_BENCH_KEYS["AWS_SECRET_ACCESS_KEY"],
        )

    def s3_env(self) -> dict[str, str]:
        """What `serve` needs to keep its objects in this bucket (AIRLOCK_STORAGE=s3)."""
        return {
            "AIRLOCK_STORAGE": "s3",
            "AIRLOCK_S3_BUCKET": self.bucket,
            "AIRLOCK_S3_ENDPOINT_URL": self.endpoint,
            "AIRLOCK_S3_REGION": "us-east-1",
            **AWS_BENCH_KEYS,
        }

    def stop(self) -> None:
        stop_process(self.proc, timeout=20)
        self.log.close()


def createuser(env: dict[str, str], name: str, tenant: str = "bench") -> str:
    """A user of `tenant` made by `manage.py createuser` in env's database; returns its API token."""
    out = subprocess.run(
        [sys.executable, "manage.py", "createuser", name, "--tenant", tenant],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1].split()[-1]


def Gunicorn(env: dict[str, str], tmp: Path, workers: int = 2) -> ServerProcess:
    """gunicorn (sync workers) serving config.wsgi on a free loopback port, its log in tmp: the baselines' server."""
    port = free_port()
    return ServerProcess(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "config.wsgi:application",
            "-w",
            str(workers),
            "-k",
            "sync",
            "-b",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        env,
        tmp / "gunicorn.log",
        port,
        timeout=60,
    )


def emit(result: dict) -> None:
    print(json.dumps(result), flush=True)


# --- realistic sample files ---------------------------------------------------------


def photo_jpeg(seed: int, size: tuple[int, int] = (4000, 3000), quality: int = 88) -> bytes:
    """A 12 MP camera-like JPEG: smooth gradients, shapes and sensor noise (compresses like a photo)."""
    from PIL import Image, ImageDraw, ImageFilter

    rng = random.Random(seed)
    w, h = size
    small = Image.new("RGB", (w // 8, h // 8))
    draw = ImageDraw.Draw(small)
    top = tuple(rng.randint(40, 200) for _ in range(3))
    bottom = tuple(rng.randint(20, 160) for _ in range(3))
    for y in range(h // 8):
        t = y / (h // 8)
        draw.line([(0, y), (w // 8, y)], fill=tuple(int(a + (b - a) * t) for a, b in zip(top, bottom)))
    for _ in range(40):
        x, y = rng.randrange(w // 8), rng.randrange(h // 8)
        rad = rng.randint(5, 80)
        draw.ellipse([x - rad, y - rad, x + rad, y + rad], fill=tuple(rng.randint(0, 255) for _ in range(3)))
    image = small.resize(size, Image.Resampling.BICUBIC).filter(ImageFilter.GaussianBlur(3))
    noise = Image.effect_noise(size, 18).convert("RGB")
    image = Image.blend(image, noise, 0.22)
    buf = io.BytesIO()
    image.save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def screenshot_png(seed: int, size: tuple[int, int] = (1920, 1080)) -> bytes:
    """A UI screenshot: flat panels, text-like strokes, a few icons (compresses like a screenshot)."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    image = Image.new("RGB", size, (246, 247, 249))
    draw = ImageDraw.Draw(image)
    w, h = size
    draw.rectangle([0, 0, w, 56], fill=(32, 40, 56))
    draw.rectangle([0, 56, 260, h], fill=(236, 238, 242))
    for row in range(80, h - 20, 26):
        x = 290
        while x < w - 80:
            word = rng.randint(20, 90)
            draw.rectangle([x, row, x + word, row + 10], fill=(60 + rng.randint(0, 40),) * 3)
            x += word + 8
        if rng.random() < 0.08:
            draw.rectangle([290, row - 6, w - 60, row + 18], outline=(200, 205, 215))
    for _ in range(30):
        x, y = rng.randint(10, 230), rng.randint(70, h - 30)
        draw.ellipse([x, y, x + 18, y + 18], fill=tuple(rng.randint(0, 255) for _ in range(3)))
    # An embedded picture and a chart with anti-aliased edges, as real screenshots have.
    picture = Image.effect_noise((w // 4, h // 4), 40).convert("RGB").resize((w // 3, h // 3))
    image.paste(picture, (w - w // 3 - 40, 90))
    chart = ImageDraw.Draw(image)
    points = [(300 + i * 12, h - 120 - int(80 * math.sin(i / 6) + rng.randint(-20, 20))) for i in range(90)]
    chart.line(points, fill=(30, 120, 220), width=3)
    buf = io.BytesIO()
    image.save(buf, "PNG")
    return buf.getvalue()


def text_pdf(pages: int = 20, seed: int = 0) -> bytes:
    """A text PDF (Helvetica, about 40 lines of prose a page), like an exported report."""
    rng = random.Random(seed)
    words = (
        "airlock upload storage scanner thumbnail lifecycle committed staged sweeper reconciler "
        "attachment profile derivative status pending processing ready rejected failed tenant "
        "quarantine signature lease outbox broker worker sandbox bounds pixels pages archive"
    ).split()
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    font_id = 3
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    page_ids = []
    for p in range(pages):
        lines = []
        for i in range(40):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(8, 13)))
            lines.append(f"BT /F1 10 Tf 56 {760 - i * 17} Td ({text}) Tj ET")
        content = "\n".join(lines).encode()
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
        content_id = len(objects)
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        page_ids.append(len(objects))
    kids = " ".join(f"{pid} 0 R" for pid in page_ids)
    objects[1] = f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode()
    return pdf_document(objects)


def small_jpeg(seed: int = 0, size: tuple[int, int] = (640, 480)) -> bytes:
    return photo_jpeg(seed, size=size, quality=85)


def sample_mix(directory: Path, *, photos: int, screenshots: int, pdfs: int) -> list[dict]:
    """Write the realistic mix into directory; return [{path, profile, content_type, kind}]."""
    directory.mkdir(parents=True, exist_ok=True)
    mix = []
    for i in range(photos):
        path = directory / f"photo-{i}.jpg"
        path.write_bytes(photo_jpeg(100 + i))
        mix.append({"path": path, "profile": "image", "content_type": "image/jpeg", "kind": "photo_12mp_jpeg"})
    for i in range(screenshots):
        path = directory / f"screen-{i}.png"
        path.write_bytes(screenshot_png(200 + i, size=(1920, 1080) if i % 2 == 0 else (2560, 1440)))
        mix.append({"path": path, "profile": "image", "content_type": "image/png", "kind": "screenshot_png"})
    for i in range(pdfs):
        path = directory / f"report-{i}.pdf"
        path.write_bytes(text_pdf(20, seed=300 + i))
        mix.append({"path": path, "profile": "document", "content_type": "application/pdf", "kind": "pdf_20_pages"})
    return mix
