"""An S3 stand-in over HTTP: moto in server mode, one bucket per test.

The server starts once per session on a free loopback port; if it cannot
start, every S3 test errors (they never skip). Each test gets a fresh bucket
and the settings that point Airlock's S3 gateway at it.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator

import boto3
import pytest
from botocore.config import Config

from tests.s3.cloudflare_queues_fake import TOKEN as CLOUDFLARE_TOKEN
from tests.s3.cloudflare_queues_fake import FakeQueues
from tests.s3.support import S3Env
from tests.support.processes import free_port

_FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "airlock-test",
    "AWS_SECRET_ACCESS_KEY": "airlock-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}
_CLEARED = (
    "AWS_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_S3_ACCESS_KEY_ID",
    "AWS_S3_SECRET_ACCESS_KEY",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL_SQS",
)
REGION = "us-east-1"


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """A moto server over HTTP on 127.0.0.1 (not in-process mocks)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    saved = {name: os.environ.get(name) for name in (*_FAKE_AWS, *_CLEARED)}
    os.environ.update(_FAKE_AWS)
    for name in _CLEARED:
        os.environ.pop(name, None)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        # Fail loudly (never skip) when the stand-in does not answer.
        boto3.client("s3", endpoint_url=endpoint, region_name=REGION).list_buckets()
        yield endpoint
    finally:
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def s3(moto_endpoint, settings, storage_root) -> Iterator[S3Env]:
    """A fresh bucket, and Airlock's storage switched to S3 on it."""
    from attachments.storage import reset_gateway

    config = Config(signature_version="s3v4", s3={"addressing_style": "path"})
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name=REGION, config=config)
    sqs = boto3.client("sqs", endpoint_url=moto_endpoint, region_name=REGION)
    bucket = f"airlock-{uuid.uuid4().hex[:16]}"
    client.create_bucket(Bucket=bucket)
    settings.AIRLOCK_STORAGE = "s3"
    settings.AIRLOCK_S3_BUCKET = bucket
    settings.AIRLOCK_S3_ENDPOINT_URL = moto_endpoint
    settings.AIRLOCK_S3_REGION = REGION
    settings.AIRLOCK_S3_UPLOAD_METHOD = "POST"
    reset_gateway()
    yield S3Env(endpoint=moto_endpoint, bucket=bucket, client=client, sqs=sqs)
    reset_gateway()


@pytest.fixture
def events_token(settings) -> str:
    settings.AIRLOCK_STORAGE_EVENTS_TOKEN = "storage-events-test-token"
    return settings.AIRLOCK_STORAGE_EVENTS_TOKEN


@pytest.fixture
def multipart(s3, settings) -> S3Env:
    """S3 with a 5 MiB multipart threshold and part size (S3's smallest part), so tests stay small."""
    from attachments.storage import reset_gateway

    settings.AIRLOCK_S3_MULTIPART = settings.AIRLOCK_S3_MULTIPART.replace(threshold_bytes=5 << 20, part_bytes=5 << 20)
    reset_gateway()
    return s3


@pytest.fixture
def cloudflare_queues(settings) -> Iterator[FakeQueues]:
    """A local stand-in of Cloudflare Queues' HTTP pull API, and the token the consumer reads."""
    settings.AIRLOCK_CLOUDFLARE_API_TOKEN = CLOUDFLARE_TOKEN
    fake = FakeQueues().start()
    yield fake
    fake.stop()
