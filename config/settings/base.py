"""Airlock settings: every value comes from the environment (see docs/configuration.md)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from attachments.private_files import private_dir, private_file
from processing.stages import STAGES  # names only: no Django, no app code

from .cors import cors_origins, cors_settings
from .env import (
    env_bool,
    env_float,
    env_int,
    env_list,
    env_optional_int,
    env_path,
    env_ports,
    env_str,
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
    config: dict[str, Any] = dict(
        dj_database_url.parse(url, conn_max_age=env_int("AIRLOCK_DB_CONN_MAX_AGE", 60, low=0))
    )
    if config["ENGINE"] == "django.db.backends.postgresql" and AIRLOCK_DB_POOL_MAX > 0:
        config["CONN_MAX_AGE"] = 0  # the pool owns connection reuse (Django refuses both)
        # Django's backend with DeadlinePool (a request queues for a busy pool until its deadline).
        config["ENGINE"] = "config.postgresql"
        config["CONN_HEALTH_CHECKS"] = True  # the pool checks a connection before handing it out
        config.setdefault("OPTIONS", {}).update(_pool(AIRLOCK_DB_POOL_MAX))
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
            "timeout": env_float("AIRLOCK_DB_POOL_TIMEOUT_SECONDS", 5.0, low=0.1),
            "request_deadline": AIRLOCK_REQUEST_DEADLINE_SECONDS,
            # Give up reconnecting soon (the next request tries again at once) rather than
            # backing off for minutes: the pool recovers as soon as the database is back.
            "reconnect_timeout": 3.0,
        },
    }


# Database connections one process may hold (PostgreSQL; 0 = no pool, one per thread).
# serve on PostgreSQL + Redis: 2 web processes + the job process = 48 at most, half of the
# server's default max_connections (100). A burst of S3 uploads under CPU hogs is answered
# with 8 too, somewhat slower (bench/burst_s3.py).
AIRLOCK_DB_POOL_MAX = env_int("AIRLOCK_DB_POOL_MAX", 16, low=0)
# How long after it started a request may still queue for a busy pool's connection (then 503).
AIRLOCK_REQUEST_DEADLINE_SECONDS = env_float("AIRLOCK_REQUEST_DEADLINE_SECONDS", 30.0, low=0.1)
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
# AIRLOCK_LOGIN_FAILURE_LIMIT failures of one username from one client IP (the
# pair: failures elsewhere never lock the owner out), and a client IP after
# AIRLOCK_LOGIN_ADDRESS_FAILURE_LIMIT failures whatever the usernames (0: no
# such limit), for AIRLOCK_LOGIN_LOCKOUT_MINUTES (0: until reset in the admin,
# under Axes → Access attempts, or `manage.py axes_reset`). API tokens never go
# through these backends. Axes needs the request in authenticate(): tests sign
# in with force_login, or through the login form. attachments/login_throttle.py.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("AIRLOCK_LOGIN_FAILURE_LIMIT", 5, low=1)
_lockout_minutes = env_int("AIRLOCK_LOGIN_LOCKOUT_MINUTES", 30, low=0)
AXES_COOLOFF_TIME = timedelta(minutes=_lockout_minutes) if _lockout_minutes > 0 else None
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]  # the pair; per IP alone: the handler below
AIRLOCK_LOGIN_ADDRESS_FAILURE_LIMIT = env_int("AIRLOCK_LOGIN_ADDRESS_FAILURE_LIMIT", 20, low=0)
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
AIRLOCK_S3_MULTIPART_THRESHOLD = env_int("AIRLOCK_S3_MULTIPART_THRESHOLD", 100 * 1024 * 1024)
AIRLOCK_S3_PART_SIZE = env_int("AIRLOCK_S3_PART_SIZE", 16 * 1024 * 1024)
# The server's own writes to the bucket (derivatives, the remux of a 1 GiB video): parts of
# this size, this many in flight. Parts are read from the file as they are sent, so the
# worker's memory does not grow with either (boto3's default is 8 MiB x 10 threads).
AIRLOCK_S3_TRANSFER_CHUNK_BYTES = env_int("AIRLOCK_S3_TRANSFER_CHUNK_BYTES", 16 * 1024 * 1024)
AIRLOCK_S3_TRANSFER_THREADS = env_int("AIRLOCK_S3_TRANSFER_THREADS", 4)
# A worker downloads an object it processes once (processing/spool.py) and keeps the copy
# for its next stage; at most this many idle copies, none longer than this.
AIRLOCK_SPOOL_KEEP = env_int("AIRLOCK_SPOOL_KEEP", 2)
AIRLOCK_SPOOL_IDLE_SECONDS = env_int("AIRLOCK_SPOOL_IDLE_SECONDS", 600)
AIRLOCK_DOWNLOAD_URL_SECONDS = env_int("AIRLOCK_DOWNLOAD_URL_SECONDS", 60, low=1)
AIRLOCK_UPLOAD_URL_SECONDS = env_int("AIRLOCK_UPLOAD_URL_SECONDS", 15 * 60, low=1)
# Signed delivery links (docs/api.md, "Signed links"): how long a link in the resource
# lives, and its key. Empty secret: SECRET_KEY, made a key of its own by the purpose
# string in attachments/signing.py (and rotated with SECRET_KEY, honouring
# SECRET_KEY_FALLBACKS). Previous secrets are accepted, never used to sign.
AIRLOCK_DELIVERY_URL_SECONDS = env_int("AIRLOCK_DELIVERY_URL_SECONDS", 3600, low=1)
AIRLOCK_DELIVERY_URL_SECRET = env_str("AIRLOCK_DELIVERY_URL_SECRET", "")
AIRLOCK_DELIVERY_URL_PREVIOUS_SECRETS = env_list("AIRLOCK_DELIVERY_URL_PREVIOUS_SECRETS", [])
if any(0 < len(secret) < 32 for secret in (AIRLOCK_DELIVERY_URL_SECRET, *AIRLOCK_DELIVERY_URL_PREVIOUS_SECRETS)):
    raise ImproperlyConfigured("AIRLOCK_DELIVERY_URL_SECRET (and each previous secret) must be at least 32 characters")
# After the upload URL expired, how long a committed intent may still wait for
# its storage event before it ends as rejected/object_missing.
AIRLOCK_UPLOAD_GRACE_SECONDS = env_int("AIRLOCK_UPLOAD_GRACE_SECONDS", 3600, low=0)
AIRLOCK_X_ACCEL_REDIRECT_PREFIX = env_str("AIRLOCK_X_ACCEL_REDIRECT_PREFIX")
AIRLOCK_STORAGE_EVENTS_TOKEN = env_str("AIRLOCK_STORAGE_EVENTS_TOKEN")
# `consume_storage_events --cloudflare-queue`: an API token with Queues read and write.
AIRLOCK_CLOUDFLARE_API_TOKEN = env_str("AIRLOCK_CLOUDFLARE_API_TOKEN")
AIRLOCK_QUARANTINE_DAYS = env_int("AIRLOCK_QUARANTINE_DAYS", 30, low=0)

# --- Profiles (API.md defaults) ----------------------------------------------
MIB = 1024 * 1024
_PHOTO_TYPES = ["image/jpeg", "image/png", "image/gif", "image/webp", "image/heic", "image/heif", "image/avif"]
_VIDEO_TYPES = ["video/mp4", "video/quicktime", "video/webm"]
_IMAGE_MAX_BYTES = env_int("AIRLOCK_IMAGE_MAX_BYTES", 25 * MIB, low=1)
_MEDIA_MAX_BYTES = env_int("AIRLOCK_MEDIA_MAX_BYTES", 1024 * MIB, low=1)
AIRLOCK_PROFILES: dict[str, dict[str, Any]] = {
    "image": {
        "allowed_types": _PHOTO_TYPES,
        "max_bytes": _IMAGE_MAX_BYTES,
        "processor": "image",
        "derivatives": ["thumbnail", "display"],  # display: HEIC/HEIF/AVIF only
        "single_per_owner": False,
    },
    "avatar": {
        "allowed_types": ["image/jpeg", "image/png", "image/webp", "image/heic", "image/heif", "image/avif"],
        "max_bytes": env_int("AIRLOCK_AVATAR_MAX_BYTES", 5 * MIB, low=1),
        "processor": "image",
        "derivatives": ["thumbnail", "display"],  # display: HEIC/HEIF/AVIF only
        "single_per_owner": True,
    },
    "document": {
        "allowed_types": ["application/pdf"],
        "max_bytes": env_int("AIRLOCK_DOCUMENT_MAX_BYTES", 100 * MIB, low=1),
        "processor": "pdf",
        "derivatives": ["page_count", "text", "thumbnail"],
        "single_per_owner": False,
    },
    "archive": {
        "allowed_types": ["application/zip"],
        "max_bytes": env_int("AIRLOCK_ARCHIVE_MAX_BYTES", 200 * MIB, low=1),
        "processor": "zip",
        "derivatives": ["entries"],
        "single_per_owner": False,
    },
    "media": {
        "allowed_types": [*_VIDEO_TYPES, "audio/mp4", "audio/mpeg", "audio/ogg", "audio/x-wav"],  # M4A, MP3, Ogg, WAV
        "max_bytes": _MEDIA_MAX_BYTES,
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
                "max_bytes": _IMAGE_MAX_BYTES,
                "processor": "image",
                "derivatives": ["thumbnail", "display"],
            },
            "video": {
                "allowed_types": _VIDEO_TYPES,
                "max_bytes": _MEDIA_MAX_BYTES,
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
# Bodies posted through the API (POST /attachments) are capped lower than
# direct uploads: they pass through a web worker.
AIRLOCK_UPLOAD_THROUGH_MAX_BYTES = env_int("AIRLOCK_UPLOAD_THROUGH_MAX_BYTES", 25 * MIB)

# --- Lifecycle ---------------------------------------------------------------
AIRLOCK_STAGED_TTL_SECONDS = env_int("AIRLOCK_STAGED_TTL_SECONDS", 7 * 86400, low=1)
AIRLOCK_HEARTBEAT_WINDOW_SECONDS = env_int("AIRLOCK_HEARTBEAT_WINDOW_SECONDS", 7 * 86400, low=1)
AIRLOCK_HARD_CAP_SECONDS = env_int("AIRLOCK_HARD_CAP_SECONDS", 15 * 86400, low=1)
# How long a released (once committed) file stays restorable before the sweeper removes its objects.
AIRLOCK_RELEASE_GRACE_SECONDS = env_int("AIRLOCK_RELEASE_GRACE_SECONDS", 86400, low=0)
# How long a guest of an upload link may remove a file it sent (the link page's "Remove").
AIRLOCK_GUEST_UNDO_HOURS = env_int("AIRLOCK_GUEST_UNDO_HOURS", 24, low=0)
AIRLOCK_AUDIT_WINDOW_DAYS = env_int("AIRLOCK_AUDIT_WINDOW_DAYS", 30, low=0)
# Retention: the sweeper's purge phase deletes these rows once past their window
# (sweeper/retention.py). Unsent outbox rows are never purged.
AIRLOCK_OUTBOX_RETENTION_DAYS = env_int("AIRLOCK_OUTBOX_RETENTION_DAYS", 7, low=0)
AIRLOCK_STORAGE_EVENT_RETENTION_DAYS = env_int("AIRLOCK_STORAGE_EVENT_RETENTION_DAYS", 30, low=0)
AIRLOCK_RUN_RETENTION_DAYS = env_int("AIRLOCK_RUN_RETENTION_DAYS", 30, low=0)
# What stays of a hard-deleted attachment (id, tenant, key, digest, final state, times, its history summarized).
AIRLOCK_TOMBSTONE_RETENTION_DAYS = env_int("AIRLOCK_TOMBSTONE_RETENTION_DAYS", 365, low=0)
# Resolved dead letters (open ones stay until a human resolves them).
AIRLOCK_DEAD_LETTER_RETENTION_DAYS = env_int("AIRLOCK_DEAD_LETTER_RETENTION_DAYS", 90, low=0)
# Finished backfills' checkpoints (an unfinished one stays: its run resumes from it).
AIRLOCK_BACKFILL_CHECKPOINT_RETENTION_DAYS = env_int("AIRLOCK_BACKFILL_CHECKPOINT_RETENTION_DAYS", 30, low=0)
# The admin's own history of staff edits (django.contrib.admin LogEntry).
AIRLOCK_ADMIN_LOG_RETENTION_DAYS = env_int("AIRLOCK_ADMIN_LOG_RETENTION_DAYS", 365, low=0)
# django-axes' login attempts (lockout counters), access logs and failure logs.
AIRLOCK_LOGIN_LOG_RETENTION_DAYS = env_int("AIRLOCK_LOGIN_LOG_RETENTION_DAYS", 30, low=0)
# Webhook events with their deliveries and attempts, once nothing is owed.
AIRLOCK_WEBHOOK_RETENTION_DAYS = env_int("AIRLOCK_WEBHOOK_RETENTION_DAYS", 30, low=0)
# Expired browser sessions, days after they expired (0: at the first sweep after).
AIRLOCK_SESSION_RETENTION_DAYS = env_int("AIRLOCK_SESSION_RETENTION_DAYS", 0, low=0)
# Client tokens (hosts' and guest pages'), days after they expired: an expired one authenticates nobody.
AIRLOCK_CLIENT_TOKEN_RETENTION_DAYS = env_int("AIRLOCK_CLIENT_TOKEN_RETENTION_DAYS", 1, low=0)

# --- Processing --------------------------------------------------------------
AIRLOCK_SNIFF_BYTES = 4100
AIRLOCK_MAX_PIXELS = env_int("AIRLOCK_MAX_PIXELS", 50_000_000, low=1)
AIRLOCK_MAX_PDF_PAGES = env_int("AIRLOCK_MAX_PDF_PAGES", 2000, low=1)
AIRLOCK_MAX_TEXT_CHARS = env_int("AIRLOCK_MAX_TEXT_CHARS", 1_000_000, low=0)
AIRLOCK_ZIP_MAX_ENTRIES = env_int("AIRLOCK_ZIP_MAX_ENTRIES", 1000, low=1)
AIRLOCK_ZIP_MAX_RATIO = env_float("AIRLOCK_ZIP_MAX_RATIO", 100.0, low=1.0)
AIRLOCK_ZIP_MAX_TOTAL_BYTES = env_int("AIRLOCK_ZIP_MAX_TOTAL_BYTES", 1024 * MIB, low=1)
AIRLOCK_ZIP_MAX_DEPTH = env_int("AIRLOCK_ZIP_MAX_DEPTH", 3, low=0)
# ZIP entries the sandbox cannot inflate (implode, PPMd, encrypted) are rejected
# (archive_uninspectable) unless this allows them, unscanned, on their declared sizes.
AIRLOCK_ZIP_ALLOW_UNINSPECTABLE = env_bool("AIRLOCK_ZIP_ALLOW_UNINSPECTABLE", False)
# Video and audio (the media profile), read from the headers before any frame is decoded.
AIRLOCK_MEDIA_MAX_DURATION_SECONDS = env_int("AIRLOCK_MEDIA_MAX_DURATION_SECONDS", 3600, low=1)
AIRLOCK_MEDIA_MAX_PIXELS = env_int("AIRLOCK_MEDIA_MAX_PIXELS", 7680 * 4320, low=1)  # per frame: 8K UHD
AIRLOCK_MEDIA_MAX_STREAMS = env_int("AIRLOCK_MEDIA_MAX_STREAMS", 16, low=1)
AIRLOCK_SANDBOX_MEMORY_BYTES = env_int("AIRLOCK_SANDBOX_MEMORY_BYTES", 1024 * MIB, low=1)
AIRLOCK_SANDBOX_CPU_SECONDS = env_int("AIRLOCK_SANDBOX_CPU_SECONDS", 30, low=1)
AIRLOCK_SANDBOX_WALL_SECONDS = env_float("AIRLOCK_SANDBOX_WALL_SECONDS", 60.0, low=1.0)
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
AIRLOCK_MAX_ATTEMPTS = env_int("AIRLOCK_MAX_ATTEMPTS", 5)
AIRLOCK_RETRY_BASE_SECONDS = env_float("AIRLOCK_RETRY_BASE_SECONDS", 5.0)
AIRLOCK_RETRY_MAX_SECONDS = env_float("AIRLOCK_RETRY_MAX_SECONDS", 600.0)
AIRLOCK_LEASE_SECONDS = env_int("AIRLOCK_LEASE_SECONDS", 300)
# Jobs of one tenant running at once at each stage named in AIRLOCK_TENANT_FAIR_STAGES;
# the rest wait parked, off the queue (processing/fairness.py).
AIRLOCK_TENANT_CONCURRENCY = env_int("AIRLOCK_TENANT_CONCURRENCY", 2)
# Jobs of one subject (a host's person) running at once within its tenant's slots; unset:
# the tenant's concurrency − 1, at least 1, so one person alone never fills the tenant's share.
AIRLOCK_SUBJECT_CONCURRENCY = env_optional_int("AIRLOCK_SUBJECT_CONCURRENCY", low=1)
AIRLOCK_TENANT_FAIR_STAGES = [s.lower() for s in env_list("AIRLOCK_TENANT_FAIR_STAGES", list(STAGES))]
if _unknown_stages := sorted(set(AIRLOCK_TENANT_FAIR_STAGES) - set(STAGES)):
    raise ImproperlyConfigured(f"AIRLOCK_TENANT_FAIR_STAGES: unknown stage(s) {', '.join(_unknown_stages)}")
AIRLOCK_WORKER_THREADS = env_int("AIRLOCK_WORKER_THREADS", 4, low=1)
# --- A video's web rendition (docs/api.md, processing/renditions.py) ----------
# Transcodes run on their own queue by their own worker threads (per process), so a photo's
# steps never wait behind one; one tenant runs at most AIRLOCK_TRANSCODE_TENANT_CONCURRENCY.
AIRLOCK_TRANSCODE_CONCURRENCY = env_int("AIRLOCK_TRANSCODE_CONCURRENCY", 1, low=1)
AIRLOCK_TRANSCODE_TENANT_CONCURRENCY = env_int("AIRLOCK_TRANSCODE_TENANT_CONCURRENCY", 1, low=1)
# Bounds of one transcode job, per minute of video (plus one minute's worth for any clip).
AIRLOCK_TRANSCODE_CPU_SECONDS_PER_MINUTE = env_int("AIRLOCK_TRANSCODE_CPU_SECONDS_PER_MINUTE", 180, low=1)
AIRLOCK_TRANSCODE_WALL_SECONDS_PER_MINUTE = env_int("AIRLOCK_TRANSCODE_WALL_SECONDS_PER_MINUTE", 300, low=1)
# Variants made at once in one web process (each is a sandbox job); more answer 503 VARIANT_BUSY.
# Above the tenant's share by default, so one tenant alone never fills a process.
AIRLOCK_VARIANT_CONCURRENCY = env_int(
    "AIRLOCK_VARIANT_CONCURRENCY", max(os.cpu_count() or 1, AIRLOCK_TENANT_CONCURRENCY + 1), low=1
)
# How long a worker's idle queue consumer waits before it looks again: it bounds
# the pick-up of each step's job (a file's three steps wait for it in turn).
# `rundramatiq` takes it from Dramatiq's documented `dramatiq_worker_timeout`
# variable (default 1000 ms there: about a second per file of nothing).
AIRLOCK_WORKER_POLL_MS = env_int("AIRLOCK_WORKER_POLL_MS", 100, low=10)
os.environ.setdefault("dramatiq_worker_timeout", str(AIRLOCK_WORKER_POLL_MS))
AIRLOCK_TICK_SECONDS = env_float("AIRLOCK_TICK_SECONDS", 5.0, low=0.1)
# Prefix of Airlock's own Redis keys (per-tenant slots, locks): lets several
# deployments or test runs share one Redis.
AIRLOCK_KEY_PREFIX = env_str("AIRLOCK_KEY_PREFIX", "airlock")

# --- Webhooks (webhooks/, docs/webhooks.md) ----------------------------------
# The global endpoint: every tenant's events. Its secret is one `whsec_…` value,
# or several separated by spaces while rotating (each signs every delivery).
AIRLOCK_WEBHOOK_URL = env_str("AIRLOCK_WEBHOOK_URL")
AIRLOCK_WEBHOOK_SECRET = webhook_secrets(env_str("AIRLOCK_WEBHOOK_SECRET"), url=AIRLOCK_WEBHOOK_URL)
AIRLOCK_WEBHOOK_TIMEOUT_SECONDS = env_float("AIRLOCK_WEBHOOK_TIMEOUT_SECONDS", 10.0, low=0.1)
AIRLOCK_WEBHOOK_RETRY_BASE_SECONDS = env_float("AIRLOCK_WEBHOOK_RETRY_BASE_SECONDS", 5.0, low=0.01)
AIRLOCK_WEBHOOK_RETRY_MAX_SECONDS = env_float("AIRLOCK_WEBHOOK_RETRY_MAX_SECONDS", 3600.0, low=0.01)
AIRLOCK_WEBHOOK_RETRY_WINDOW_SECONDS = env_float("AIRLOCK_WEBHOOK_RETRY_WINDOW_SECONDS", 86400.0, low=0.0)
AIRLOCK_WEBHOOK_DISABLE_AFTER_SECONDS = env_float("AIRLOCK_WEBHOOK_DISABLE_AFTER_SECONDS", 3 * 86400.0, low=0.0)
AIRLOCK_WEBHOOK_ROTATION_OVERLAP_SECONDS = env_float("AIRLOCK_WEBHOOK_ROTATION_OVERLAP_SECONDS", 86400.0, low=0.0)
AIRLOCK_WEBHOOK_ALLOW_PRIVATE = env_bool("AIRLOCK_WEBHOOK_ALLOW_PRIVATE", False)
# The ports an endpoint URL may name (webhooks/urlguard.py); ALLOW_PRIVATE lifts the rule.
AIRLOCK_WEBHOOK_ALLOWED_PORTS = env_ports("AIRLOCK_WEBHOOK_ALLOWED_PORTS", [443])
AIRLOCK_WEBHOOK_REDRIVE_SECONDS = env_float("AIRLOCK_WEBHOOK_REDRIVE_SECONDS", 60.0, low=0.1)
# Deliveries to one endpoint in flight at once (0 = no cap): a slow or failing endpoint,
# or one tenant's flood of events, cannot take every worker thread (processing/fairness.py).
AIRLOCK_WEBHOOK_ENDPOINT_CONCURRENCY = env_int("AIRLOCK_WEBHOOK_ENDPOINT_CONCURRENCY", 2, low=0)

# --- Scanners ----------------------------------------------------------------
CLAMD_SOCKET = env_str("CLAMD_SOCKET")
CLAMD_HOST = env_str("CLAMD_HOST")
CLAMD_PORT = env_int("CLAMD_PORT", 3310, low=1, high=65535)
AIRLOCK_SCAN_TIMEOUT = env_float("AIRLOCK_SCAN_TIMEOUT", 120.0, low=0.1)
AIRLOCK_YARA_ENABLED = env_bool("AIRLOCK_YARA_ENABLED", True)
_yara_dir = env_str("AIRLOCK_YARA_RULES_DIR")
AIRLOCK_YARA_RULES_DIR = Path(_yara_dir) if _yara_dir else None
# When the signature version in force changes (clamd VERSION, the YARA rules' hash),
# ready files are rescanned in the background, newest first, at most this many a
# minute (0 = never in the background; `manage.py rescan` still flags files). See processing/rescan/jobs.py.
AIRLOCK_RESCAN_FILES_PER_MINUTE = env_int("AIRLOCK_RESCAN_FILES_PER_MINUTE", 120, low=0)

# --- Sweeper -----------------------------------------------------------------
AIRLOCK_SWEEP_INTERVAL_SECONDS = env_int("AIRLOCK_SWEEP_INTERVAL_SECONDS", 30 * 60, low=1)
AIRLOCK_SWEEP_BATCH = env_int("AIRLOCK_SWEEP_BATCH", 500, low=1)
AIRLOCK_SWEEP_CONCURRENCY = env_int("AIRLOCK_SWEEP_CONCURRENCY", 8, low=1)
AIRLOCK_SWEEPER_KILLSWITCH = env_str("AIRLOCK_SWEEPER_KILLSWITCH")  # "1"/"0" overrides the admin toggle
AIRLOCK_SWEEPER_DRY_RUN = env_str("AIRLOCK_SWEEPER_DRY_RUN")

# --- Rate limits -------------------------------------------------------------
AIRLOCK_INTENTS_PER_MINUTE = env_int("AIRLOCK_INTENTS_PER_MINUTE", 300, low=0)
AIRLOCK_MAX_PENDING_PER_USER = env_int("AIRLOCK_MAX_PENDING_PER_USER", 500, low=0)

# --- Quotas --------------------------------------------------------------------
# Per tenant; unset = unlimited. A tenant's own limits (admin) override these.
AIRLOCK_TENANT_QUOTA_BYTES = env_optional_int("AIRLOCK_TENANT_QUOTA_BYTES", low=0)
AIRLOCK_TENANT_QUOTA_FILES = env_optional_int("AIRLOCK_TENANT_QUOTA_FILES", low=0)
# Per subject (one of a host's people, in any tenant); unset = no limit.
AIRLOCK_SUBJECT_QUOTA_BYTES = env_optional_int("AIRLOCK_SUBJECT_QUOTA_BYTES", low=0)
AIRLOCK_SUBJECT_QUOTA_FILES = env_optional_int("AIRLOCK_SUBJECT_QUOTA_FILES", low=0)

# --- Operations ----------------------------------------------------------------
# /metrics needs `Authorization: Bearer <token>` when set.
# PROMETHEUS_MULTIPROC_DIR (read by prometheus_client itself, not here) makes
# /metrics aggregate the counters of every web and worker process.
AIRLOCK_METRICS_TOKEN = env_str("AIRLOCK_METRICS_TOKEN")
# Without a token /metrics is open here (the embedded default serves loopback);
# production settings close it (404) unless this is set, or a token is.
AIRLOCK_METRICS_OPEN = env_bool("AIRLOCK_METRICS_OPEN", True)
# Per-tenant series (airlock_tenant_*{tenant="<slug>"}) name every tenant and its
# usage: off unless asked for.
AIRLOCK_METRICS_TENANT_LABELS = env_bool("AIRLOCK_METRICS_TENANT_LABELS", False)

# --- Web serving (manage.py serve) ---------------------------------------------------
# Web processes (SQLite or PostgreSQL); serve runs one when it also runs the worker
# or scheduler of the in-process broker (the embedded default), whose messages live there.
AIRLOCK_WEB_PROCESSES = env_int("AIRLOCK_WEB_PROCESSES", 2, low=1)
AIRLOCK_WEB_THREADS = env_int("AIRLOCK_WEB_THREADS", 128, low=1)  # per process; idle ones are not created
AIRLOCK_HTTP_KEEPALIVE_SECONDS = env_int("AIRLOCK_HTTP_KEEPALIVE_SECONDS", 5, low=0)
# One JSON line per request from the server itself (method, path without its query string, status,
# bytes, duration); off by default: a proxy in front usually keeps the access log.
AIRLOCK_WEB_ACCESS_LOG = env_bool("AIRLOCK_WEB_ACCESS_LOG", False)
# A request's headers, whole, within this (read in the selector, no thread held).
AIRLOCK_HTTP_HEADER_TIMEOUT_SECONDS = env_float("AIRLOCK_HTTP_HEADER_TIMEOUT_SECONDS", 10.0, low=0.1)
AIRLOCK_HTTP_BODY_TIMEOUT_SECONDS = env_float("AIRLOCK_HTTP_BODY_TIMEOUT_SECONDS", 30.0, low=0.1)  # between two reads
# A body, whole, within BODY_DEADLINE + its size / BODY_MIN_BYTES_PER_SECOND (408 after):
# a 25 MiB photo may take 30 s + 100 min, a trickle of a byte a second is cut after 30 s.
AIRLOCK_HTTP_BODY_DEADLINE_SECONDS = env_float("AIRLOCK_HTTP_BODY_DEADLINE_SECONDS", 30.0, low=0.0)
AIRLOCK_HTTP_BODY_MIN_BYTES_PER_SECOND = env_int("AIRLOCK_HTTP_BODY_MIN_BYTES_PER_SECOND", 4096, low=1)
# Per web process and per client address (0 = no limit). Off behind trusted proxies
# (AIRLOCK_TRUSTED_PROXY_HOPS > 0): every client then has the proxy's address.
AIRLOCK_HTTP_MAX_CONNECTIONS_PER_ADDRESS = env_int(
    "AIRLOCK_HTTP_MAX_CONNECTIONS_PER_ADDRESS", 0 if AIRLOCK_TRUSTED_PROXY_HOPS else 512, low=0
)
AIRLOCK_HTTP_MAX_THREADS_PER_ADDRESS = env_int(
    "AIRLOCK_HTTP_MAX_THREADS_PER_ADDRESS", 0 if AIRLOCK_TRUSTED_PROXY_HOPS else max(1, AIRLOCK_WEB_THREADS // 2), low=0
)
AIRLOCK_GRACEFUL_TIMEOUT_SECONDS = env_int("AIRLOCK_GRACEFUL_TIMEOUT_SECONDS", 30, low=0)
AIRLOCK_WAITERS_PER_PROCESS = env_int("AIRLOCK_WAITERS_PER_PROCESS", 96, low=0)
AIRLOCK_WAITERS_PER_USER = env_int("AIRLOCK_WAITERS_PER_USER", 32, low=0)
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
    # A client token reaches only the views that allow it (attachments/api/client_scope.py).
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "attachments.api.client_scope.ClientTokenScope",
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
