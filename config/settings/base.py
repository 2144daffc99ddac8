"""Airlock settings: every value comes from the environment (see docs/configuration.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from attachments.private_files import private_dir, private_file
from processing.stages import STAGES  # names only: no Django, no app code

from .cors import cors_origins, cors_settings
from .env import (
    Group,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_object,
    env_path,
    env_ports,
    env_str,
    key,
    origin_host,
    public_origin,
    webhook_secrets,
)
from .secret import install_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent.parent

DEBUG = env_bool("DJANGO_DEBUG", False)

AIRLOCK_DATA_DIR = env_path("AIRLOCK_DATA_DIR", BASE_DIR / "var")

# The embedded default must run with no setup, and no two installs may share a
# key: without DJANGO_SECRET_KEY a random one is made on first run and kept in
# the data directory (0600). Production settings require DJANGO_SECRET_KEY.
SECRET_KEY = env_str("DJANGO_SECRET_KEY") or install_secret_key(AIRLOCK_DATA_DIR)
# The origin clients reach Airlock at (https://files.example.com): absolute URLs
# (upload URLs, links) are minted from it rather than from the request's Host.
AIRLOCK_PUBLIC_URL = public_origin(env_str("AIRLOCK_PUBLIC_URL"))
# The embedded default serves loopback (`serve` binds 127.0.0.1): only loopback
# names are ours, and the public URL's host when one is set. Production settings
# refuse to start without an explicit list.
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", *origin_host(AIRLOCK_PUBLIC_URL)])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
# Browser apps on these origins may call the API and tus (and, through
# `manage.py s3_setup`, upload to the bucket); empty: none (config/settings/cors.py).
AIRLOCK_CORS_ALLOWED_ORIGINS = cors_origins(env_list("AIRLOCK_CORS_ALLOWED_ORIGINS", []))
AIRLOCK_CORS_ALLOW_CREDENTIALS = env_bool("AIRLOCK_CORS_ALLOW_CREDENTIALS", False)
_CORS = cors_settings(AIRLOCK_CORS_ALLOWED_ORIGINS, allow_credentials=AIRLOCK_CORS_ALLOW_CREDENTIALS)
CORS_ALLOW_ALL_ORIGINS: bool = _CORS["CORS_ALLOW_ALL_ORIGINS"]
CORS_ALLOWED_ORIGINS: list[str] = _CORS["CORS_ALLOWED_ORIGINS"]
CORS_ALLOW_CREDENTIALS: bool = _CORS["CORS_ALLOW_CREDENTIALS"]
CORS_URLS_REGEX: str = _CORS["CORS_URLS_REGEX"]
CORS_ALLOW_HEADERS: list[str] = _CORS["CORS_ALLOW_HEADERS"]
CORS_EXPOSE_HEADERS: list[str] = _CORS["CORS_EXPOSE_HEADERS"]
CORS_ALLOW_METHODS: list[str] = _CORS["CORS_ALLOW_METHODS"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_dramatiq",
    "attachments",
    "processing",
    "sweeper",
    "webhooks",
    "ops",
    "corsheaders",
    "axes",  # admin (and upload page) login throttling; see "Login throttling" below
]

MIDDLEWARE = [
    # Outermost: the pooled connection goes back before the response is written to the client.
    "attachments.services.connections.ReleaseBeforeResponseMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "ops.logging.RequestIdMiddleware",
    # CORS before anything that answers on its own: a preflight is answered here (no
    # auth, no body read, no rate limit), and every /api/ answer, errors included, gets its headers.
    "corsheaders.middleware.CorsMiddleware",
    # Before anything that may query: a slow body must not hold a pooled connection.
    "ops.body_first.BodyFirstMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: turns a locked-out login into its 429 answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "ops.banner.admin_banner",
            ],
        },
    },
]


def _database() -> dict[str, Any]:
    url = env_str("DATABASE_URL")
    if url is None:
        url = f"sqlite:///{AIRLOCK_DATA_DIR / 'airlock.sqlite3'}"
    config: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=AIRLOCK_DB_POOL.conn_max_age))
    if config["ENGINE"] == "django.db.backends.postgresql" and AIRLOCK_DB_POOL.max > 0:
        config["CONN_MAX_AGE"] = 0  # the pool owns connection reuse (Django refuses both)
        # Django's backend with DeadlinePool (a request queues for a busy pool until its deadline).
        config["ENGINE"] = "config.postgresql"
        config["CONN_HEALTH_CHECKS"] = True  # the pool checks a connection before handing it out
        config.setdefault("OPTIONS", {}).update(_pool(AIRLOCK_DB_POOL.max))
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # The embedded default must work on a fresh checkout, before any command ran;
        # the database holds every user's data: 0600 (SQLite gives its -wal and -shm
        # files the database file's mode).
        if config["NAME"] and config["NAME"] != ":memory:":
            private_dir(Path(config["NAME"]).parent)
            private_file(Path(config["NAME"]))
        # Web threads and worker threads write concurrently: WAL plus
        # immediate transactions keep SQLite from answering "database is locked".
        config["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "timeout": 20,
        }
    return config


def _pool(max_size: int) -> dict:
    """Django's psycopg pool: at most max_size connections per process, reused across requests and threads."""
    return {
        "connect_timeout": 5,
        "pool": {
            "min_size": 0,
            "max_size": max_size,
            "max_idle": 60.0,
            # A wait this long during which no connection came back (an outage) answers 503 +
            # Retry-After; while connections do come back a request waits on, up to its deadline.
            "timeout": AIRLOCK_DB_POOL.timeout_seconds,
            "request_deadline": AIRLOCK_DB_POOL.request_deadline_seconds,
            # Give up reconnecting soon (the next request tries again at once) rather than
            # backing off for minutes: the pool recovers as soon as the database is back.
            "reconnect_timeout": 3.0,
        },
    }


# Database connections one process may hold (PostgreSQL; 0 = no pool, one per thread).
# serve on PostgreSQL + Redis: 2 web processes + the job process = 48 at most, half of the
# server's default max_connections (100). A burst of S3 uploads under CPU hogs is answered
# with 8 too, somewhat slower (bench/burst_s3.py).
# conn_max_age: a connection's reuse across requests without a pool (SQLite, or max=0);
# timeout_seconds: a wait for a pooled connection that sees none come back answers 503;
# request_deadline_seconds: how long after it started a request may queue for a busy pool.
@dataclass(frozen=True)
class DbPool(Group):
    max: int = key(16, low=0, was="AIRLOCK_DB_POOL_MAX")
    conn_max_age: int = key(60, low=0, was="AIRLOCK_DB_CONN_MAX_AGE")
    timeout_seconds: float = key(5.0, low=0.1, was="AIRLOCK_DB_POOL_TIMEOUT_SECONDS")
    request_deadline_seconds: float = key(30.0, low=0.1, was="AIRLOCK_REQUEST_DEADLINE_SECONDS")


AIRLOCK_DB_POOL = env_object("AIRLOCK_DB_POOL", DbPool)
DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = AIRLOCK_DATA_DIR / "static"

LOGIN_URL = "/admin/login/"

# --- Login throttling (django-axes) ---------------------------------------------
# Password logins (the admin's form, which the upload page uses too) lock out after
# AIRLOCK_LOGIN_LIMITS' `failures` of one username from one client IP (the
# pair: failures elsewhere never lock the owner out), and a client IP after
# `address_failures` whatever the usernames (0: no such limit), for
# `lockout_minutes` (0: until reset in the admin,
# under Axes → Access attempts, or `manage.py axes_reset`). API tokens never go
# through these backends. Axes needs the request in authenticate(): tests sign
# in with force_login, or through the login form. attachments/login_throttle.py.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]


@dataclass(frozen=True)
class LoginLimits(Group):
    failures: int = key(5, low=1, was="AIRLOCK_LOGIN_FAILURE_LIMIT")
    address_failures: int = key(20, low=0, was="AIRLOCK_LOGIN_ADDRESS_FAILURE_LIMIT")
    lockout_minutes: int = key(30, low=0, was="AIRLOCK_LOGIN_LOCKOUT_MINUTES")


AIRLOCK_LOGIN_LIMITS = env_object("AIRLOCK_LOGIN_LIMITS", LoginLimits)
AXES_FAILURE_LIMIT = AIRLOCK_LOGIN_LIMITS.failures
AXES_COOLOFF_TIME = timedelta(minutes=AIRLOCK_LOGIN_LIMITS.lockout_minutes) or None  # 0: until reset
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]  # the pair; per IP alone: the handler below
AXES_HANDLER = "attachments.login_throttle.AddressLimitedAxesHandler"
AXES_RESET_ON_SUCCESS = False  # a success must not wipe an attacker's count for the IP
# Behind N reverse proxies the client is the Nth address from the right of
# X-Forwarded-For; with 0 (the default) only the socket's peer address counts.
AIRLOCK_TRUSTED_PROXY_HOPS = env_int("AIRLOCK_TRUSTED_PROXY_HOPS", 0, low=0)
AXES_CLIENT_IP_CALLABLE = "attachments.login_throttle.client_ip"
LOGIN_REDIRECT_URL = "/"

# --- Storage -----------------------------------------------------------------
AIRLOCK_STORAGE = env_str("AIRLOCK_STORAGE", "local")
AIRLOCK_STORAGE_ROOT = env_path("AIRLOCK_STORAGE_ROOT", AIRLOCK_DATA_DIR / "storage")
AIRLOCK_S3_BUCKET = env_str("AIRLOCK_S3_BUCKET")
AIRLOCK_S3_ENDPOINT_URL = env_str("AIRLOCK_S3_ENDPOINT_URL")
AIRLOCK_S3_REGION = env_str("AIRLOCK_S3_REGION", "us-east-1")
# Which S3 the bucket is: "s3" (AWS, MinIO…) or "r2" (Cloudflare R2: no presigned POST);
# unset: "r2" when the endpoint is *.r2.cloudflarestorage.com, "s3" otherwise.
AIRLOCK_S3_FLAVOR = env_str("AIRLOCK_S3_FLAVOR")
# POST or PUT; unset: POST on S3, PUT on R2.
AIRLOCK_S3_UPLOAD_METHOD = env_str("AIRLOCK_S3_UPLOAD_METHOD")


# A direct upload declared larger than threshold_bytes goes to the bucket in parts of
# part_bytes (presigned multipart; S3 wants parts of at least 5 MiB but the last).
@dataclass(frozen=True)
class S3Multipart(Group):
    threshold_bytes: int = key(100 * 1024 * 1024, low=1, was="AIRLOCK_S3_MULTIPART_THRESHOLD")
    part_bytes: int = key(16 * 1024 * 1024, low=1, was="AIRLOCK_S3_PART_SIZE")


AIRLOCK_S3_MULTIPART = env_object("AIRLOCK_S3_MULTIPART", S3Multipart)


# The server's own writes to the bucket (derivatives, the remux of a 1 GiB video): parts of
# this size, this many in flight. Parts are read from the file as they are sent, so the
# worker's memory does not grow with either (boto3's default is 8 MiB x 10 threads).
# A worker downloads an object it processes once (processing/spool.py) and keeps the copy
# for its next stage; at most `spool_keep` idle copies, none longer than `spool_idle_seconds`.
@dataclass(frozen=True)
class S3Transfer(Group):
    chunk_bytes: int = key(16 * 1024 * 1024, low=5 * 1024 * 1024, was="AIRLOCK_S3_TRANSFER_CHUNK_BYTES")
    threads: int = key(4, low=1, was="AIRLOCK_S3_TRANSFER_THREADS")
    spool_keep: int = key(2, low=0, was="AIRLOCK_SPOOL_KEEP")
    spool_idle_seconds: int = key(600, low=0, was="AIRLOCK_SPOOL_IDLE_SECONDS")


AIRLOCK_S3_TRANSFER = env_object("AIRLOCK_S3_TRANSFER", S3Transfer)


# Lifetimes: an upload URL (and a tus upload's idle time); a presigned S3 download; a signed
# delivery link (docs/api.md, "Signed links"), rounded up to 5 minutes.
@dataclass(frozen=True)
class UrlSeconds(Group):
    upload: int = key(15 * 60, low=1, was="AIRLOCK_UPLOAD_URL_SECONDS")
    download: int = key(60, low=1, was="AIRLOCK_DOWNLOAD_URL_SECONDS")
    delivery: int = key(3600, low=1, was="AIRLOCK_DELIVERY_URL_SECONDS")


AIRLOCK_URL_SECONDS = env_object("AIRLOCK_URL_SECONDS", UrlSeconds)
# The key of signed delivery links. Empty: SECRET_KEY, made a key of its own by the purpose
# string in attachments/signing.py (and rotated with SECRET_KEY, honouring
# SECRET_KEY_FALLBACKS). Previous secrets are accepted, never used to sign.
AIRLOCK_DELIVERY_URL_SECRET = env_str("AIRLOCK_DELIVERY_URL_SECRET", "")
AIRLOCK_DELIVERY_URL_PREVIOUS_SECRETS = env_list("AIRLOCK_DELIVERY_URL_PREVIOUS_SECRETS", [])
if any(0 < len(secret) < 32 for secret in (AIRLOCK_DELIVERY_URL_SECRET, *AIRLOCK_DELIVERY_URL_PREVIOUS_SECRETS)):
    raise ImproperlyConfigured("AIRLOCK_DELIVERY_URL_SECRET (and each previous secret) must be at least 32 characters")


# staged_ttl, heartbeat_window, hard_cap: a staged upload's life (docs/lifecycle.md);
# release_grace: how long a released (once committed) file stays restorable;
# upload_grace: after its upload URL expired, how long a committed intent may still wait
# for its storage event before it ends as rejected/object_missing.
@dataclass(frozen=True)
class LifecycleSeconds(Group):
    staged_ttl: int = key(7 * 86400, low=1, was="AIRLOCK_STAGED_TTL_SECONDS")
    heartbeat_window: int = key(7 * 86400, low=1, was="AIRLOCK_HEARTBEAT_WINDOW_SECONDS")
    hard_cap: int = key(15 * 86400, low=1, was="AIRLOCK_HARD_CAP_SECONDS")
    release_grace: int = key(86400, low=0, was="AIRLOCK_RELEASE_GRACE_SECONDS")
    upload_grace: int = key(3600, low=0, was="AIRLOCK_UPLOAD_GRACE_SECONDS")


AIRLOCK_LIFECYCLE_SECONDS = env_object("AIRLOCK_LIFECYCLE_SECONDS", LifecycleSeconds)
AIRLOCK_X_ACCEL_REDIRECT_PREFIX = env_str("AIRLOCK_X_ACCEL_REDIRECT_PREFIX")
AIRLOCK_STORAGE_EVENTS_TOKEN = env_str("AIRLOCK_STORAGE_EVENTS_TOKEN")
# `consume_storage_events --cloudflare-queue`: an API token with Queues read and write.
AIRLOCK_CLOUDFLARE_API_TOKEN = env_str("AIRLOCK_CLOUDFLARE_API_TOKEN")

# --- Profiles (API.md defaults) ----------------------------------------------
MIB = 1024 * 1024
_PHOTO_TYPES = ["image/jpeg", "image/png", "image/gif", "image/webp", "image/heic", "image/heif", "image/avif"]
_VIDEO_TYPES = ["video/mp4", "video/quicktime", "video/webm"]


# Each profile's largest file; upload_through: bodies posted through the API (POST
# /attachments) are capped lower than direct uploads, as they pass through a web worker.
@dataclass(frozen=True)
class MaxBytes(Group):
    image: int = key(25 * MIB, low=1, was="AIRLOCK_IMAGE_MAX_BYTES")
    avatar: int = key(5 * MIB, low=1, was="AIRLOCK_AVATAR_MAX_BYTES")
    document: int = key(100 * MIB, low=1, was="AIRLOCK_DOCUMENT_MAX_BYTES")
    archive: int = key(200 * MIB, low=1, was="AIRLOCK_ARCHIVE_MAX_BYTES")
    media: int = key(1024 * MIB, low=1, was="AIRLOCK_MEDIA_MAX_BYTES")
    upload_through: int = key(25 * MIB, low=1, was="AIRLOCK_UPLOAD_THROUGH_MAX_BYTES")


AIRLOCK_MAX_BYTES = env_object("AIRLOCK_MAX_BYTES", MaxBytes)
AIRLOCK_PROFILES: dict[str, dict[str, Any]] = {
    "image": {
        "allowed_types": _PHOTO_TYPES,
        "max_bytes": AIRLOCK_MAX_BYTES.image,
        "processor": "image",
        "derivatives": ["thumbnail", "display"],  # display: HEIC/HEIF/AVIF only
        "single_per_owner": False,
    },
    "avatar": {
        "allowed_types": ["image/jpeg", "image/png", "image/webp", "image/heic", "image/heif", "image/avif"],
        "max_bytes": AIRLOCK_MAX_BYTES.avatar,
        "processor": "image",
        "derivatives": ["thumbnail", "display"],  # display: HEIC/HEIF/AVIF only
        "single_per_owner": True,
    },
    "document": {
        "allowed_types": ["application/pdf"],
        "max_bytes": AIRLOCK_MAX_BYTES.document,
        "processor": "pdf",
        "derivatives": ["page_count", "text", "thumbnail"],
        "single_per_owner": False,
    },
    "archive": {
        "allowed_types": ["application/zip"],
        "max_bytes": AIRLOCK_MAX_BYTES.archive,
        "processor": "zip",
        "derivatives": ["entries"],
        "single_per_owner": False,
    },
    "media": {
        "allowed_types": [*_VIDEO_TYPES, "audio/mp4", "audio/mpeg", "audio/ogg", "audio/x-wav"],  # M4A, MP3, Ogg, WAV
        "max_bytes": AIRLOCK_MAX_BYTES.media,
        "processor": "media",
        "derivatives": ["thumbnail", "poster"],  # videos only
        "single_per_owner": False,
    },
    # A phone's camera roll. Each file goes the way the type found in its bytes says: a photo
    # is processed and limited as the image profile's are, a video as the media profile's.
    "camera": {
        "kinds": {
            "photo": {
                "allowed_types": _PHOTO_TYPES,
                "max_bytes": AIRLOCK_MAX_BYTES.image,
                "processor": "image",
                "derivatives": ["thumbnail", "display"],
            },
            "video": {
                "allowed_types": _VIDEO_TYPES,
                "max_bytes": AIRLOCK_MAX_BYTES.media,
                "processor": "media",
                "derivatives": ["thumbnail", "poster"],
            },
        },
        "single_per_owner": False,
    },
}
# Named variants per profile (docs/api.md, "Variants"): name → long edge in px, fit
# within, never upscaled; made on first request in the sandbox, then kept as derivatives.
# A file that is not an image (a camera profile's video) has none.
AIRLOCK_VARIANTS: dict[str, dict[str, int]] = {
    "image": {"small": 640, "medium": 1280, "large": 2048},
    "avatar": {"small": 640, "medium": 1280, "large": 2048},
    "camera": {"small": 640, "medium": 1280, "large": 2048},
}

# --- Lifecycle ---------------------------------------------------------------
# How long a guest of an upload link may remove a file it sent (the link page's "Remove").
AIRLOCK_GUEST_UNDO_HOURS = env_int("AIRLOCK_GUEST_UNDO_HOURS", 24, low=0)


# Days kept: soft-deleted rows (audit_window), quarantined objects; and the rows the
# sweeper's purge phase deletes once past their window (sweeper/retention.py): sent outbox
# rows (unsent ones are never purged), storage events, sweep and reconcile runs, tombstones
# (what stays of a hard-deleted attachment), resolved dead letters (open ones stay),
# finished backfills' checkpoints, the admin's log of staff edits, django-axes' login
# records, webhook events once nothing is owed, expired sessions and client tokens (days
# after they expired).
@dataclass(frozen=True)
class RetentionDays(Group):
    audit_window: int = key(30, low=0, was="AIRLOCK_AUDIT_WINDOW_DAYS")
    quarantine: int = key(30, low=0, was="AIRLOCK_QUARANTINE_DAYS")
    outbox: int = key(7, low=0, was="AIRLOCK_OUTBOX_RETENTION_DAYS")
    storage_events: int = key(30, low=0, was="AIRLOCK_STORAGE_EVENT_RETENTION_DAYS")
    runs: int = key(30, low=0, was="AIRLOCK_RUN_RETENTION_DAYS")
    tombstones: int = key(365, low=0, was="AIRLOCK_TOMBSTONE_RETENTION_DAYS")
    dead_letters: int = key(90, low=0, was="AIRLOCK_DEAD_LETTER_RETENTION_DAYS")
    backfill_checkpoints: int = key(30, low=0, was="AIRLOCK_BACKFILL_CHECKPOINT_RETENTION_DAYS")
    admin_log: int = key(365, low=0, was="AIRLOCK_ADMIN_LOG_RETENTION_DAYS")
    login_log: int = key(30, low=0, was="AIRLOCK_LOGIN_LOG_RETENTION_DAYS")
    webhooks: int = key(30, low=0, was="AIRLOCK_WEBHOOK_RETENTION_DAYS")
    sessions: int = key(0, low=0, was="AIRLOCK_SESSION_RETENTION_DAYS")
    client_tokens: int = key(1, low=0, was="AIRLOCK_CLIENT_TOKEN_RETENTION_DAYS")


AIRLOCK_RETENTION_DAYS = env_object("AIRLOCK_RETENTION_DAYS", RetentionDays)

# --- Processing --------------------------------------------------------------
AIRLOCK_SNIFF_BYTES = 4100


# What one file may make a decoder do, read before any pixel or member is decoded: an
# image's pixels, a PDF's pages and extracted text, a ZIP's entries, inflation ratio,
# inflated bytes and nesting, a video or audio file's duration, frame size and streams.
@dataclass(frozen=True)
class DecodeLimits(Group):
    pixels: int = key(50_000_000, low=1, was="AIRLOCK_MAX_PIXELS")
    pdf_pages: int = key(2000, low=1, was="AIRLOCK_MAX_PDF_PAGES")
    text_chars: int = key(1_000_000, low=0, was="AIRLOCK_MAX_TEXT_CHARS")
    zip_entries: int = key(1000, low=1, was="AIRLOCK_ZIP_MAX_ENTRIES")
    zip_ratio: float = key(100.0, low=1.0, was="AIRLOCK_ZIP_MAX_RATIO")
    zip_total_bytes: int = key(1024 * MIB, low=1, was="AIRLOCK_ZIP_MAX_TOTAL_BYTES")
    zip_depth: int = key(3, low=0, was="AIRLOCK_ZIP_MAX_DEPTH")
    media_duration_seconds: int = key(3600, low=1, was="AIRLOCK_MEDIA_MAX_DURATION_SECONDS")
    media_pixels: int = key(7680 * 4320, low=1, was="AIRLOCK_MEDIA_MAX_PIXELS")  # per frame: 8K UHD
    media_streams: int = key(16, low=1, was="AIRLOCK_MEDIA_MAX_STREAMS")


AIRLOCK_DECODE_LIMITS = env_object("AIRLOCK_DECODE_LIMITS", DecodeLimits)
# ZIP entries the sandbox cannot inflate (implode, PPMd, encrypted) are rejected
# (archive_uninspectable) unless this allows them, unscanned, on their declared sizes.
AIRLOCK_ZIP_ALLOW_UNINSPECTABLE = env_bool("AIRLOCK_ZIP_ALLOW_UNINSPECTABLE", False)


# One decoder job's memory, CPU and wall-clock time; a transcode's CPU and wall-clock
# time per minute of video (plus one minute's worth for any clip).
@dataclass(frozen=True)
class SandboxLimits(Group):
    memory_bytes: int = key(1024 * MIB, low=1, was="AIRLOCK_SANDBOX_MEMORY_BYTES")
    cpu_seconds: int = key(30, low=1, was="AIRLOCK_SANDBOX_CPU_SECONDS")
    wall_seconds: float = key(60.0, low=1.0, was="AIRLOCK_SANDBOX_WALL_SECONDS")
    transcode_cpu_seconds_per_minute: int = key(180, low=1, was="AIRLOCK_TRANSCODE_CPU_SECONDS_PER_MINUTE")
    transcode_wall_seconds_per_minute: int = key(300, low=1, was="AIRLOCK_TRANSCODE_WALL_SECONDS_PER_MINUTE")


AIRLOCK_SANDBOX_LIMITS = env_object("AIRLOCK_SANDBOX_LIMITS", SandboxLimits)
# Confinement layers (AIRLOCK_SANDBOX_CONFINE's names) decoder jobs may run without where this
# host cannot apply them; any other missing layer stops every decoder job and fails /readyz.
# The sandbox (pure Python, and the fork server it starts) reads the variable itself, as it
# does AIRLOCK_SANDBOX_CONFINE; read here too so a misspelt layer stops the process at start.
# The embedded default often runs as a developer's own user, where the root-only layers (uid,
# nproc) cannot apply: it accepts their absence unless the variable says otherwise, and /readyz
# says so (degraded). Production accepts nothing by default (production.py sets it empty first).
os.environ.setdefault("AIRLOCK_SANDBOX_ACCEPT_MISSING", "uid,nproc")
AIRLOCK_SANDBOX_ACCEPT_MISSING = [n.lower() for n in env_list("AIRLOCK_SANDBOX_ACCEPT_MISSING", [])]
if _unknown_layers := sorted(
    set(AIRLOCK_SANDBOX_ACCEPT_MISSING) - set(("uid", "nnp", "seccomp", "landlock", "mountns", "nproc", "subreaper"))
):
    raise ImproperlyConfigured(f"AIRLOCK_SANDBOX_ACCEPT_MISSING: unknown layer(s) {', '.join(_unknown_layers)}")


# A file that failed while its dependencies answered is retried max_attempts times in all,
# base_seconds doubling (±50 % jitter) up to max_seconds apart, then failed and dead-lettered.
# lease_seconds: a processing attempt's lease, renewed while its worker beats.
@dataclass(frozen=True)
class Retries(Group):
    max_attempts: int = key(5, low=1, was="AIRLOCK_MAX_ATTEMPTS")
    base_seconds: float = key(5.0, low=0.0, was="AIRLOCK_RETRY_BASE_SECONDS")
    max_seconds: float = key(600.0, low=0.0, was="AIRLOCK_RETRY_MAX_SECONDS")
    lease_seconds: int = key(300, low=1, was="AIRLOCK_LEASE_SECONDS")


AIRLOCK_RETRIES = env_object("AIRLOCK_RETRIES", Retries)


# tenant: jobs of one tenant running at once at each stage named in AIRLOCK_TENANT_FAIR_STAGES,
# the rest wait parked, off the queue (processing/fairness.py); subject: jobs of one subject (a
# host's person) within its tenant's slots, unset: the tenant's − 1, at least 1, so one person
# alone never fills the tenant's share; worker_threads: serve's worker threads; transcode and
# transcode_tenant: transcode threads per worker process (their own queue, so a photo's steps
# never wait behind one) and transcodes of one tenant at once; variant: variants made at once in
# one web process (each a sandbox job; more answer 503 VARIANT_BUSY), by default above the
# tenant's share, so one tenant alone never fills a process.
@dataclass(frozen=True)
class Concurrency(Group):
    tenant: int = key(2, low=1, was="AIRLOCK_TENANT_CONCURRENCY")
    subject: int | None = key(None, low=1, was="AIRLOCK_SUBJECT_CONCURRENCY")
    worker_threads: int = key(4, low=1, was="AIRLOCK_WORKER_THREADS")
    transcode: int = key(1, low=1, was="AIRLOCK_TRANSCODE_CONCURRENCY")
    transcode_tenant: int = key(1, low=1, was="AIRLOCK_TRANSCODE_TENANT_CONCURRENCY")
    variant: int | None = key(None, low=1, was="AIRLOCK_VARIANT_CONCURRENCY")

    @property
    def variants_at_once(self) -> int:
        return self.variant or max(os.cpu_count() or 1, self.tenant + 1)


AIRLOCK_CONCURRENCY = env_object("AIRLOCK_CONCURRENCY", Concurrency)
AIRLOCK_TENANT_FAIR_STAGES = [s.lower() for s in env_list("AIRLOCK_TENANT_FAIR_STAGES", list(STAGES))]
if _unknown_stages := sorted(set(AIRLOCK_TENANT_FAIR_STAGES) - set(STAGES)):
    raise ImproperlyConfigured(f"AIRLOCK_TENANT_FAIR_STAGES: unknown stage(s) {', '.join(_unknown_stages)}")


# How long a worker's idle queue consumer waits before it looks again: it bounds
# the pick-up of each step's job (a file's three steps wait for it in turn).
# `rundramatiq` takes it from Dramatiq's documented `dramatiq_worker_timeout`
# variable (default 1000 ms there: about a second per file of nothing).
# web_processes: serve's web processes (SQLite or PostgreSQL), one when it also runs the
# worker or scheduler of the in-process broker (the embedded default), whose messages live
# there; web_threads: request threads per process (idle ones are not created); worker_poll_ms
# (above); tick_seconds: serve's scheduler tick; access_log: one JSON line per request from
# the server itself (off: a proxy in front usually keeps the access log).
@dataclass(frozen=True)
class Serve(Group):
    web_processes: int = key(2, low=1, was="AIRLOCK_WEB_PROCESSES")
    web_threads: int = key(128, low=1, was="AIRLOCK_WEB_THREADS")
    worker_poll_ms: int = key(100, low=10, was="AIRLOCK_WORKER_POLL_MS")
    tick_seconds: float = key(5.0, low=0.1, was="AIRLOCK_TICK_SECONDS")
    access_log: bool = key(False, was="AIRLOCK_WEB_ACCESS_LOG")


AIRLOCK_SERVE = env_object("AIRLOCK_SERVE", Serve)
os.environ.setdefault("dramatiq_worker_timeout", str(AIRLOCK_SERVE.worker_poll_ms))
# Prefix of Airlock's own Redis keys (per-tenant slots, locks): lets several
# deployments or test runs share one Redis.
AIRLOCK_KEY_PREFIX = env_str("AIRLOCK_KEY_PREFIX", "airlock")

# --- Webhooks (webhooks/, docs/webhooks.md) ----------------------------------
# The global endpoint: every tenant's events. Its secret is one `whsec_…` value,
# or several separated by spaces while rotating (each signs every delivery).
AIRLOCK_WEBHOOK_URL = env_str("AIRLOCK_WEBHOOK_URL")
AIRLOCK_WEBHOOK_SECRET = webhook_secrets(env_str("AIRLOCK_WEBHOOK_SECRET"), url=AIRLOCK_WEBHOOK_URL)


# How deliveries go (docs/webhooks.md): a request not answered within timeout_seconds
# failed; retries start retry_base_seconds after (doubling, ±20 % jitter, at most
# retry_max_seconds apart) and go on for retry_window_seconds before the delivery is
# dead-lettered; an endpoint failing for disable_after_seconds (and 10 times in a row) is
# disabled; a delivery due redrive_seconds with no attempt is sent again by the tick; a
# rotated tenant secret keeps signing for rotation_overlap_seconds; at most
# endpoint_concurrency deliveries to one endpoint in flight (0 = no cap), so a slow endpoint
# or one tenant's flood of events cannot take every worker thread.
@dataclass(frozen=True)
class WebhookDelivery(Group):
    timeout_seconds: float = key(10.0, low=0.1, was="AIRLOCK_WEBHOOK_TIMEOUT_SECONDS")
    retry_base_seconds: float = key(5.0, low=0.01, was="AIRLOCK_WEBHOOK_RETRY_BASE_SECONDS")
    retry_max_seconds: float = key(3600.0, low=0.01, was="AIRLOCK_WEBHOOK_RETRY_MAX_SECONDS")
    retry_window_seconds: float = key(86400.0, low=0.0, was="AIRLOCK_WEBHOOK_RETRY_WINDOW_SECONDS")
    disable_after_seconds: float = key(3 * 86400.0, low=0.0, was="AIRLOCK_WEBHOOK_DISABLE_AFTER_SECONDS")
    redrive_seconds: float = key(60.0, low=0.1, was="AIRLOCK_WEBHOOK_REDRIVE_SECONDS")
    rotation_overlap_seconds: float = key(86400.0, low=0.0, was="AIRLOCK_WEBHOOK_ROTATION_OVERLAP_SECONDS")
    endpoint_concurrency: int = key(2, low=0, was="AIRLOCK_WEBHOOK_ENDPOINT_CONCURRENCY")


AIRLOCK_WEBHOOK_DELIVERY = env_object("AIRLOCK_WEBHOOK_DELIVERY", WebhookDelivery)
AIRLOCK_WEBHOOK_ALLOW_PRIVATE = env_bool("AIRLOCK_WEBHOOK_ALLOW_PRIVATE", False)
# The ports an endpoint URL may name (webhooks/urlguard.py); ALLOW_PRIVATE lifts the rule.
AIRLOCK_WEBHOOK_ALLOWED_PORTS = env_ports("AIRLOCK_WEBHOOK_ALLOWED_PORTS", [443])

# --- Scanners ----------------------------------------------------------------
CLAMD_SOCKET = env_str("CLAMD_SOCKET")
CLAMD_HOST = env_str("CLAMD_HOST")
CLAMD_PORT = env_int("CLAMD_PORT", 3310, low=1, high=65535)
AIRLOCK_SCAN_TIMEOUT = env_float("AIRLOCK_SCAN_TIMEOUT", 120.0, low=0.1)
AIRLOCK_YARA_ENABLED = env_bool("AIRLOCK_YARA_ENABLED", True)
_yara_dir = env_str("AIRLOCK_YARA_RULES_DIR")
AIRLOCK_YARA_RULES_DIR = Path(_yara_dir) if _yara_dir else None


# --- Sweeper -----------------------------------------------------------------
# A sweep every interval_seconds, in batches of batch rows, concurrency object deletes at once.
@dataclass(frozen=True)
class Sweep(Group):
    interval_seconds: int = key(30 * 60, low=1, was="AIRLOCK_SWEEP_INTERVAL_SECONDS")
    batch: int = key(500, low=1, was="AIRLOCK_SWEEP_BATCH")
    concurrency: int = key(8, low=1, was="AIRLOCK_SWEEP_CONCURRENCY")


AIRLOCK_SWEEP = env_object("AIRLOCK_SWEEP", Sweep)
AIRLOCK_SWEEPER_KILLSWITCH = env_str("AIRLOCK_SWEEPER_KILLSWITCH")  # "1"/"0" overrides the admin toggle
AIRLOCK_SWEEPER_DRY_RUN = env_str("AIRLOCK_SWEEPER_DRY_RUN")


# --- Rate limits -------------------------------------------------------------
# Per subject (a host's person; the account without Airlock-Subject): intents a minute, and
# uploads outstanding (pending) at once, 429 beyond. rescan_files_per_minute: when the
# signature version in force changes (clamd VERSION, the YARA rules' hash), ready files are
# rescanned in the background, newest first, at most this many a minute (0 = never in the
# background; `manage.py rescan` still flags files). See processing/rescan/jobs.py.
@dataclass(frozen=True)
class RateLimits(Group):
    intents_per_minute: int = key(300, low=0, was="AIRLOCK_INTENTS_PER_MINUTE")
    pending_per_subject: int = key(500, low=0, was="AIRLOCK_MAX_PENDING_PER_USER")
    rescan_files_per_minute: int = key(120, low=0, was="AIRLOCK_RESCAN_FILES_PER_MINUTE")


AIRLOCK_RATE_LIMITS = env_object("AIRLOCK_RATE_LIMITS", RateLimits)


# --- Quotas --------------------------------------------------------------------
# Per tenant; unset = unlimited. A tenant's own limits (admin) override these.
@dataclass(frozen=True)
class TenantQuota(Group):
    bytes: int | None = key(None, low=0, was="AIRLOCK_TENANT_QUOTA_BYTES")
    files: int | None = key(None, low=0, was="AIRLOCK_TENANT_QUOTA_FILES")


AIRLOCK_TENANT_QUOTA = env_object("AIRLOCK_TENANT_QUOTA", TenantQuota)


# Per subject (one of a host's people, in any tenant); unset = no limit.
@dataclass(frozen=True)
class SubjectQuota(Group):
    bytes: int | None = key(None, low=0, was="AIRLOCK_SUBJECT_QUOTA_BYTES")
    files: int | None = key(None, low=0, was="AIRLOCK_SUBJECT_QUOTA_FILES")


AIRLOCK_SUBJECT_QUOTA = env_object("AIRLOCK_SUBJECT_QUOTA", SubjectQuota)

# --- Operations ----------------------------------------------------------------
# /metrics needs `Authorization: Bearer <token>` when set.
# PROMETHEUS_MULTIPROC_DIR (read by prometheus_client itself, not here) makes
# /metrics aggregate the counters of every web and worker process.
AIRLOCK_METRICS_TOKEN = env_str("AIRLOCK_METRICS_TOKEN")


# Without a token /metrics is open here (the embedded default serves loopback);
# production settings close it (404) unless open is set, or a token is.
# Per-tenant series (airlock_tenant_*{tenant="<slug>"}) name every tenant and its
# usage: off unless asked for (tenant_labels).
@dataclass(frozen=True)
class Metrics(Group):
    open: bool | None = key(None, was="AIRLOCK_METRICS_OPEN")  # unset: open here, closed in production.py
    tenant_labels: bool = key(False, was="AIRLOCK_METRICS_TENANT_LABELS")


_METRICS_GIVEN = env_object("AIRLOCK_METRICS", Metrics)  # production.py reads `open` as given
AIRLOCK_METRICS = _METRICS_GIVEN.replace(open=_METRICS_GIVEN.open is not False)


# --- Web serving (manage.py serve) ---------------------------------------------------
# What one client may hold of the server (ops/httpserver.py, ops/httpintake.py): an idle
# keep-alive connection is closed after keepalive_seconds; a request's headers, whole, within
# header_timeout_seconds (read in the selector, no thread held); at most body_timeout_seconds
# between two reads of a body, and a body whole within body_deadline_seconds + its size at
# body_min_bytes_per_second (408 after: a 25 MiB photo may take 30 s + 100 min, a trickle of
# a byte a second is cut after 30 s); connections_per_address and threads_per_address per web
# process (0 = no limit; off behind trusted proxies, where every client has the proxy's
# address); graceful_timeout_seconds for in-flight requests on SIGTERM; ?wait= requests
# waiting at once per web process and per user within one (beyond: the wait is skipped).
@dataclass(frozen=True)
class HttpLimits(Group):
    keepalive_seconds: int = key(5, low=0, was="AIRLOCK_HTTP_KEEPALIVE_SECONDS")
    header_timeout_seconds: float = key(10.0, low=0.1, was="AIRLOCK_HTTP_HEADER_TIMEOUT_SECONDS")
    body_timeout_seconds: float = key(30.0, low=0.1, was="AIRLOCK_HTTP_BODY_TIMEOUT_SECONDS")
    body_deadline_seconds: float = key(30.0, low=0.0, was="AIRLOCK_HTTP_BODY_DEADLINE_SECONDS")
    body_min_bytes_per_second: int = key(4096, low=1, was="AIRLOCK_HTTP_BODY_MIN_BYTES_PER_SECOND")
    connections_per_address: int = key(
        0 if AIRLOCK_TRUSTED_PROXY_HOPS else 512, low=0, was="AIRLOCK_HTTP_MAX_CONNECTIONS_PER_ADDRESS"
    )
    threads_per_address: int = key(
        0 if AIRLOCK_TRUSTED_PROXY_HOPS else max(1, AIRLOCK_SERVE.web_threads // 2),
        low=0,
        was="AIRLOCK_HTTP_MAX_THREADS_PER_ADDRESS",
    )
    graceful_timeout_seconds: int = key(30, low=0, was="AIRLOCK_GRACEFUL_TIMEOUT_SECONDS")
    waiters_per_process: int = key(96, low=0, was="AIRLOCK_WAITERS_PER_PROCESS")
    waiters_per_user: int = key(32, low=0, was="AIRLOCK_WAITERS_PER_USER")


AIRLOCK_HTTP_LIMITS = env_object("AIRLOCK_HTTP_LIMITS", HttpLimits)
# A tenant's new uploads are refused (503 + Retry-After) while its own files
# waiting for the pipeline have waited longer than this (0 = never); see
# attachments/services/backlog.py.
AIRLOCK_MAX_BACKLOG_SECONDS = env_float("AIRLOCK_MAX_BACKLOG_SECONDS", 120.0, low=0.0)
WHITENOISE_USE_FINDERS = True  # static files straight from the apps: no collectstatic step
WHITENOISE_AUTOREFRESH = False

# --- Broker ------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
RABBITMQ_URL = env_str("RABBITMQ_URL")

_DRAMATIQ_MIDDLEWARE = [
    "dramatiq.middleware.AgeLimit",
    "dramatiq.middleware.TimeLimit",
    "dramatiq.middleware.Callbacks",
    "dramatiq.middleware.Pipelines",
    "dramatiq.middleware.Retries",
    "django_dramatiq.middleware.DbConnectionsMiddleware",
    # The web request's id (message option "request_id") follows into the job's logs.
    "processing.request_context.RequestIdMiddleware",
    # Each worker logs at boot the sandbox confinement its decoder jobs get.
    "processing.worker_boot.SandboxConfinementLog",
    # ... and the signatures it scans with (a change starts the background rescan).
    "processing.worker_boot.SignaturesAtBoot",
    # ... and removes the spool directories (local copies of objects) of workers killed before their exit.
    "processing.worker_boot.SpoolLeftovers",
    # Each worker beats while it runs (renewing its jobs' leases); the reconciler re-drives a silent one's files.
    "processing.worker_boot.WorkerHeartbeat",
]
DRAMATIQ_BROKER: dict[str, Any]
if REDIS_URL:
    DRAMATIQ_BROKER = {
        # Dramatiq's, with idle consumers waiting on a doorbell instead of polling (processing/broker.py).
        "BROKER": "processing.broker.RedisBroker",
        # Queues under AIRLOCK_KEY_PREFIX (the default prefix keeps dramatiq's own namespace):
        # two installs or test servers sharing one Redis must not take each other's jobs.
        "OPTIONS": {
            "url": REDIS_URL,
            **({"namespace": f"{AIRLOCK_KEY_PREFIX}-dramatiq"} if AIRLOCK_KEY_PREFIX != "airlock" else {}),
        },
        "MIDDLEWARE": _DRAMATIQ_MIDDLEWARE,
    }
elif RABBITMQ_URL:
    DRAMATIQ_BROKER = {
        "BROKER": "dramatiq.brokers.rabbitmq.RabbitmqBroker",
        "OPTIONS": {"url": RABBITMQ_URL},
        "MIDDLEWARE": _DRAMATIQ_MIDDLEWARE,
    }
else:
    DRAMATIQ_BROKER = {
        "BROKER": "dramatiq.brokers.stub.StubBroker",
        "OPTIONS": {},
        "MIDDLEWARE": _DRAMATIQ_MIDDLEWARE,
    }
DRAMATIQ_AUTODISCOVER_MODULES = ["actors"]
DRAMATIQ_TASKS_DATABASE = "default"

CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "airlock"}
    )
}

# --- API ---------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "attachments.api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # A client token reaches only the views that allow it (attachments/client_tokens/scope.py).
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "attachments.client_tokens.scope.ClientTokenScope",
    ],
    "DEFAULT_PARSER_CLASSES": ["attachments.api.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "attachments.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Airlock API",
    "DESCRIPTION": "Upload intents, gated downloads and the upload-first lifecycle.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and the docs page are public (they describe, they grant nothing).
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI and Redoc assets come from drf-spectacular-sidecar: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "attachments.api.schema.postprocess",
    ],
    "ENUM_NAME_OVERRIDES": {"AttachmentStatusEnum": "attachments.models.Status.choices"},
}

DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * MIB
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * MIB

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "ops.logging.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json"}},
    "root": {"handlers": ["console"], "level": env_str("AIRLOCK_LOG_LEVEL", "INFO")},
    "loggers": {
        "django.server": {"level": "WARNING"},
        "dramatiq": {"level": "WARNING"},
        "pika": {"level": "WARNING"},
        "axes": {"level": "WARNING"},  # login failures and lockouts are warnings; no start-up banner
    },
}
