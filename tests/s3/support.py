"""Helpers for the S3 tests: the bucket handle, event documents, uploads with a plain HTTP client."""

from __future__ import annotations

import json
import os
import random
import uuid
from dataclasses import dataclass
from io import StringIO
from typing import Any
from urllib.parse import quote_plus

import requests
from botocore.exceptions import ClientError
from django.core.management import call_command

from tests.support import create_intent, jpeg_bytes, run_pipeline


@dataclass
class S3Env:
    endpoint: str
    bucket: str
    client: Any  # boto3 S3 client, straight at moto (not through Airlock)
    sqs: Any

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)

    def get(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
        except ClientError:
            return False
        return True

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=key)

    def notify_queue(self) -> str:
        """A fresh SQS queue that this bucket notifies of every create and remove."""
        url = self.sqs.create_queue(
            QueueName=f"airlock-events-{uuid.uuid4().hex[:12]}", Attributes={"VisibilityTimeout": "0"}
        )["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.client.put_bucket_notification_configuration(
            Bucket=self.bucket,
            NotificationConfiguration={
                "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]}]
            },
        )
        return url

    def queue_depth(self, url: str) -> int:
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])


def s3_record(
    bucket: str,
    key: str,
    *,
    name: str = "ObjectCreated:Put",
    size: int | None = None,
    etag: str | None = None,
    sequencer: str | None = None,
    minio: bool = False,
) -> dict:
    """One record as S3 (or MinIO, with its "s3:" prefix) sends it: the key is URL-encoded."""
    obj: dict[str, Any] = {"key": quote_plus(key)}
    if size is not None:
        obj["size"] = size
    if etag is not None:
        obj["eTag"] = etag
    if sequencer is not None:
        obj["sequencer"] = sequencer
    return {
        "eventVersion": "2.1",
        "eventSource": "minio:s3" if minio else "aws:s3",
        "awsRegion": "us-east-1",
        "eventTime": "2026-11-30T10:00:00.000Z",
        "eventName": f"s3:{name}" if minio else name,
        "s3": {"s3SchemaVersion": "1.0", "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"}, "object": obj},
    }


R2_CREATED = ("PutObject", "CopyObject", "CompleteMultipartUpload")
R2_REMOVED = ("DeleteObject", "LifecycleDeletion")


def r2_body(
    bucket: str,
    key: str,
    *,
    action: str = "PutObject",
    size: int | None = None,
    etag: str | None = None,
    event_time: str = "2026-12-06T10:00:00.000Z",
) -> dict:
    """One R2 event notification as a queue message carries it: the key as it is (not URL-encoded);
    deletions have no size or eTag; a copy names its source."""
    obj: dict[str, Any] = {"key": key}
    if action in R2_CREATED:
        obj["size"] = 0 if size is None else size
        obj["eTag"] = etag or uuid.uuid4().hex
    body: dict[str, Any] = {
        "account": "3f4b7e3dcab231cbfdaa90a6a28bd548",
        "action": action,
        "bucket": bucket,
        "object": obj,
        "eventTime": event_time,
    }
    if action == "CopyObject":
        body["copySource"] = {"bucket": bucket, "object": "elsewhere/original"}
    return body


def r2_body_for(env: S3Env, key: str, *, action: str = "PutObject", **extra) -> dict:
    """The R2 notification for the object now at `key`."""
    head = env.client.head_object(Bucket=env.bucket, Key=key)
    return r2_body(env.bucket, key, action=action, size=head["ContentLength"], etag=head["ETag"].strip('"'), **extra)


def event_for(env: S3Env, key: str, *, name: str = "ObjectCreated:Put", minio: bool = False, **extra) -> dict:
    """The event document storage would send for the object now at `key`."""
    head = env.client.head_object(Bucket=env.bucket, Key=key)
    record = s3_record(
        env.bucket, key, name=name, size=head["ContentLength"], etag=head["ETag"].strip('"'), minio=minio, **extra
    )
    if minio:
        return {"EventName": record["eventName"], "Key": f"{env.bucket}/{key}", "Records": [record]}
    return {"Records": [record]}


def post_events(payload: Any, *, token: str | None, raw: bytes | None = None, scheme: str = "Bearer"):
    from rest_framework.test import APIClient

    headers = {"HTTP_AUTHORIZATION": f"{scheme} {token}"} if token is not None else {}
    body = raw if raw is not None else json.dumps(payload).encode()
    return APIClient().generic("POST", "/api/v1/storage-events", body, content_type="application/json", **headers)


def mp4_bytes(total: int, seed: int | None = 7) -> bytes:
    """A playable MP4 of exactly `total` bytes whose served copy is itself, byte for byte.

    The 1 s H.264 clip of the corpus, followed by video packets of random bytes (seed
    None: os.urandom) that nothing decodes (the poster is the first frame): they are
    packets, so the remux that makes the served copy keeps every one of them, and the
    file is made by that same remux (a fixed point: a second copy changes nothing).
    So a download compared with this proves every uploaded byte arrived.
    """
    import tempfile
    from pathlib import Path

    from processing.sandbox.limits import Bounds
    from processing.sandbox.media import _open
    from processing.sandbox.remux import remux

    rng = random.Random(seed) if seed is not None else None
    with tempfile.TemporaryDirectory() as tmp:
        built, work = Path(tmp) / "built.mp4", Path(tmp) / "work"
        work.mkdir()

        def made(sizes: list[int], payload: bytes) -> bytes:
            _mp4_with_packets(built, sizes, payload)
            data = built.read_bytes()
            for _ in range(4):  # btrt's peak bit rate settles after a copy or two
                facts = remux(built, "mov", data[:64], work, Bounds(), _open)
                copied = (work / facts["file"]).read_bytes()
                if copied == data:
                    return data
                built.write_bytes(copied)
                data = copied
            raise AssertionError("the copy of the copy keeps changing")

        extra = total - len(made([], b""))
        assert extra >= 1, f"an MP4 of {total} bytes is too small to hold the clip"
        payload = rng.randbytes(extra) if rng is not None else os.urandom(extra)
        sizes = [MIB_PACKET] * (extra // MIB_PACKET) + ([extra % MIB_PACKET] if extra % MIB_PACKET else [])
        for _ in range(4):  # the indexes grow with the packets: adjust the last one
            data = made(sizes, payload)
            if len(data) == total:
                return data
            sizes[-1] -= len(data) - total
        raise AssertionError(f"could not make an MP4 of exactly {total} bytes")


MIB_PACKET = 1 << 20


def _mp4_with_packets(path, sizes: list[int], payload: bytes) -> None:
    import av

    from tests.corpus import corpus_dir

    with av.open(str(corpus_dir() / "generated" / "video_faststart.mp4")) as src:
        stream = src.streams.video[0]
        packets = [p for p in src.demux(stream) if p.size]
        with av.open(str(path), "w", format="mp4", options={"fflags": "+bitexact", "movflags": "+faststart"}) as out:
            copy = out.add_stream_from_template(stream)
            copy.codec_context.codec_tag = stream.codec_context.codec_tag
            for packet in packets:
                packet.stream = copy
                out.mux(packet)
            step, last = packets[1].pts - packets[0].pts, packets[-1].pts
            pos = 0
            for n, size in enumerate(sizes, start=1):
                extra = av.Packet(payload[pos : pos + size])
                pos += size
                extra.stream, extra.time_base = copy, stream.time_base
                extra.pts = extra.dts = last + step * n
                out.mux(extra)


def intent(client, data: bytes, **kwargs) -> dict:
    response = create_intent(client, size=len(data), **kwargs)
    assert response.status_code == 201, response.content
    return response.json()


def moto_bucket_env(moto_endpoint: str, prefix: str) -> dict[str, str]:
    """A new bucket on the moto server, and the settings that put a child `serve` on it."""
    import boto3

    bucket = f"{prefix}-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    return {
        "AIRLOCK_STORAGE": "s3",
        "AIRLOCK_S3_BUCKET": bucket,
        "AIRLOCK_S3_ENDPOINT_URL": moto_endpoint,
        "AIRLOCK_S3_REGION": "us-east-1",
    }


def consume(s3: S3Env, queue_url: str, *extra: str) -> str:
    """One pass of consume_storage_events over the queue (no long poll); its report."""
    out = StringIO()
    call_command(
        "consume_storage_events",
        "--sqs-queue-url",
        queue_url,
        "--once",
        "--wait-seconds",
        "0",
        "--sqs-endpoint-url",
        s3.endpoint,
        *extra,
        stdout=out,
    )
    return out.getvalue()


def consume_cloudflare(fake: Any, queue_id: str, *extra: str) -> str:
    """consume_storage_events over the fake Cloudflare queue, draining it (--once); its report."""
    out = StringIO()
    call_command(
        "consume_storage_events",
        "--cloudflare-queue",
        f"{fake.account}/{queue_id}",
        "--cloudflare-api-url",
        fake.url,
        *(extra or ("--once",)),
        stdout=out,
    )
    return out.getvalue()


def send_upload(upload: dict, data: bytes, *, filename: str = "upload.bin", content_type: str | None = None):
    """Upload as any HTTP client would: PUT with exactly the headers, or the POST form (file last)."""
    if upload["method"] == "POST":
        ctype = content_type or upload["fields"].get("Content-Type", "application/octet-stream")
        return requests.post(upload["url"], data=upload["fields"], files={"file": (filename, data, ctype)}, timeout=30)
    assert upload["method"] == "PUT"
    return requests.put(upload["url"], data=data, headers=upload["headers"], timeout=30)


def ready_jpeg(env: S3Env, client, events_token: str, *, size=(640, 480), filename: str = "cat.jpg") -> str:
    """A JPEG sent straight to the bucket, announced by its storage event and run to ready; its id."""
    from attachments.models import Attachment

    data = jpeg_bytes(size)
    created = intent(client, data, filename=filename, content_type="image/jpeg")
    assert send_upload(created["upload"], data).status_code in (200, 201, 204)
    key = Attachment.objects.get(pk=created["id"]).storage_key
    assert post_events(event_for(env, key), token=events_token).status_code == 202
    assert run_pipeline(created["id"]) == "ready"
    return created["id"]


def send_parts(plan: dict, data: bytes, parts: list[dict] | None = None, headers: dict | None = None) -> list[dict]:
    """PUT to each part of a multipart plan (`parts`, default all it lists) its slice of data, as
    any HTTP client would; their [{part_number, etag}], for the complete call."""
    etags = []
    for part in plan["parts"] if parts is None else parts:
        start = (part["part_number"] - 1) * plan["part_size"]
        sent = requests.put(part["url"], data=data[start : start + plan["part_size"]], headers=headers, timeout=60)
        assert sent.status_code == 200, sent.text
        etags.append({"part_number": part["part_number"], "etag": sent.headers["ETag"]})
    return etags


def cpu_hogs(count: int, seconds: float = 300.0) -> list:
    """Processes that keep `count` cores busy (the other work of a busy evening); they end by themselves."""
    import subprocess
    import sys

    code = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]


def stop_all(procs: list) -> None:
    for proc in procs:
        proc.kill()
        proc.wait()


@dataclass
class Burst:
    statuses: dict[str, int]  # "step status" -> count
    failures: list[str]
    durations: list[float]  # seconds from intent to status, per client that finished
    seconds: float  # the whole burst


def upload_burst(base: str, tokens: list[str], clients: int, data: bytes, *, timeout: float = 120.0) -> Burst:
    """`clients` guests at once, each: intent, POST to the bucket, complete, status (the S3 upload flow)."""
    import threading
    import time
    from collections import Counter

    statuses: Counter = Counter()
    failures: list[str] = []
    durations: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)

    def note(step: str, response: requests.Response, ok: tuple[int, ...]) -> bool:
        with lock:
            statuses[f"{step} {response.status_code}"] += 1
            if response.status_code not in ok:
                failures.append(f"{step} {response.status_code} {response.text[:200]}")
        return response.status_code in ok

    def client(n: int) -> None:
        # A connection per request: a kept-alive one idles past serve's keep-alive (5 s) while the
        # bytes go to the bucket, and reusing it as the server closes it is a reset, not a refusal.
        session = requests.Session()
        session.headers.update({"Authorization": f"Token {tokens[n % len(tokens)]}", "Connection": "close"})
        try:
            start.wait(timeout=timeout)
            began = time.monotonic()
            got = session.post(
                f"{base}/api/v1/uploads",
                timeout=timeout,
                json={"profile": "image", "filename": f"b{n}.jpg", "size": len(data), "content_type": "image/jpeg"},
            )
            if not note("intent", got, (201,)):
                return
            body = got.json()
            upload = body["upload"]
            sent = requests.post(
                upload["url"], data=upload["fields"], timeout=timeout, files={"file": (f"b{n}.jpg", data, "image/jpeg")}
            )
            if not note("upload", sent, (200, 201, 204)):
                return
            done = session.post(f"{base}/api/v1/uploads/{body['id']}/complete", timeout=timeout)
            if not note("complete", done, (202,)):
                return
            if note("status", session.get(f"{base}/api/v1/attachments/{body['id']}", timeout=timeout), (200,)):
                with lock:
                    durations.append(time.monotonic() - began)
        except Exception as exc:  # noqa: BLE001 - no answer at all is a failure too
            with lock:
                failures.append(f"client {n}: {type(exc).__name__}: {exc}"[:300])
        finally:
            session.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    start.wait(timeout=timeout)
    began = time.monotonic()
    for thread in threads:
        thread.join(timeout * 5)
    return Burst(statuses=dict(statuses), failures=failures, durations=durations, seconds=time.monotonic() - began)
