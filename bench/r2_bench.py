#!/usr/bin/env python
"""Storage notifications consumed per second: R2 over a Cloudflare Queue vs S3 over SQS, same run.

    python bench/r2_bench.py [--quick] [--events 200] [--rounds 5]

`manage.py consume_storage_events --once` in this process on PostgreSQL (a scratch
database), the bucket on moto's S3 server (its own process, over HTTP). Each round makes
2 × --events fresh intents whose objects are in the bucket, then, in alternating order:

- R2: one R2 notification per object on the stand-in of Cloudflare Queues' HTTP pull API
  (tests/s3/cloudflare_queues_fake.py, in a process of its own as moto is), drained with
  `--cloudflare-queue` through the official SDK: pull → applied (inbox row, intake job) → acked;
- SQS: one S3 event document per object on an SQS queue of the same moto server, drained
  with `--sqs-queue-url`: receive → applied → deleted.

Both take 10 messages per receive (each API's default) and do the same work per record.

  r2_consumer_events_per_s     R2 notifications applied and acked per second (median round)
  sqs_consumer_events_per_s    S3 events applied and deleted per second (median round, info)
  r2_vs_sqs_consumer_ratio     median of the rounds' R2 ÷ SQS rates (goal ≥ 0.9)

Without PostgreSQL it exits with an error (the figure is defined on PostgreSQL).
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
import uuid
from io import StringIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.api import Database  # noqa: E402
from bench.common import AWS_BENCH_KEYS, MotoServer, emit, median, r, scratch_dir, small_jpeg  # noqa: E402
from bench.serve_bench import service_env  # noqa: E402

QUEUE_ID = "r2-bench-events"


def _fake_queues(conn) -> None:
    """The Cloudflare Queues stand-in in a process of its own: publishes what the parent sends it."""
    from tests.s3.cloudflare_queues_fake import FakeQueues

    fake = FakeQueues().start()
    conn.send((fake.account, fake.url))
    while True:
        command = conn.recv()
        if command is None:
            break
        queue_id, bodies = command
        for body in bodies:
            fake.send(queue_id, body)
        conn.send(fake.depth(queue_id))
    fake.stop()


def _fresh_objects(user, s3, bucket: str, count: int, data: bytes) -> list[str]:
    """`count` intents whose bytes are in the bucket (as a client's PUT leaves them); their keys."""
    from attachments.uploads.services.intents import upload_intent_create

    keys = []
    for i in range(count):
        intent = upload_intent_create(
            user=user, profile_name="image", filename=f"r2-{i}.jpg", size=len(data), content_type="image/jpeg"
        )
        key = intent.attachment.storage_key
        s3.put_object(Bucket=bucket, Key=key, Body=data, ContentType="image/jpeg")
        keys.append(key)
    return keys


def _consume(*args: str) -> tuple[float, str]:
    from django.core.management import call_command

    out = StringIO()
    started = time.perf_counter()
    # stderr: the note that no serve relays the intake jobs (they wait in the outbox), once per run.
    call_command("consume_storage_events", *args, "--once", stdout=out, stderr=StringIO())
    return time.perf_counter() - started, out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--events", type=int, default=0, help="events per consumer per round (default 200, quick 60)")
    parser.add_argument("--rounds", type=int, default=0, help="rounds (default 5, quick 3)")
    args = parser.parse_args()
    events = args.events or (60 if args.quick else 200)
    rounds = args.rounds or (3 if args.quick else 5)

    tmp = scratch_dir("airlock-bench-r2-")
    db = Database(tmp)
    if not db.pg:
        raise SystemExit("the R2 consumer bench needs PostgreSQL")
    parent, child = multiprocessing.get_context("spawn").Pipe()
    fake_proc = multiprocessing.get_context("spawn").Process(target=_fake_queues, args=(child,), daemon=True)
    fake_proc.start()
    account, fake_url = parent.recv()
    moto = MotoServer(tmp, "r2bench")
    try:
        # No Redis: the intake jobs stay in the outbox (a serve would relay them); the consumers' work is the same.
        env = service_env(
            tmp,
            db,
            redis=False,
            AIRLOCK_CLOUDFLARE_API_TOKEN="cloudflare-test-token",
            AIRLOCK_RATE_LIMITS={"intents_per_minute": 1000000, "pending_per_subject": 1000000},
            AIRLOCK_MAX_BACKLOG_SECONDS="0",  # the files pile up unprocessed here: no backlog gate
            **moto.s3_env(),
        )
        os.environ.update({k: v for k, v in env.items() if v is not None})
        from bench.common import bench_django, make_user

        bench_django()
        from tests.s3.support import r2_body, s3_record

        user = make_user("r2bench")
        s3 = moto.client()
        import boto3

        sqs = boto3.client("sqs", endpoint_url=moto.endpoint, region_name="us-east-1", **_aws_keys())
        queue_url = sqs.create_queue(QueueName=f"r2bench-{uuid.uuid4().hex[:8]}")["QueueUrl"]
        data = small_jpeg(1, (64, 48))

        def r2_round(keys: list[str]) -> float:
            parent.send((QUEUE_ID, [r2_body(moto.bucket, k, size=len(data)) for k in keys]))
            assert parent.recv() == len(keys)
            seconds, report = _consume("--cloudflare-queue", f"{account}/{QUEUE_ID}", "--cloudflare-api-url", fake_url)
            if f"acked={len(keys)}" not in report or f"started={len(keys)}" not in report:
                raise RuntimeError(f"the R2 consumer did not apply every event: {report}")
            return len(keys) / seconds

        def sqs_round(keys: list[str]) -> float:
            for start in range(0, len(keys), 10):
                entries = [
                    {"Id": str(i), "MessageBody": json.dumps({"Records": [s3_record(moto.bucket, k, size=len(data))]})}
                    for i, k in enumerate(keys[start : start + 10])
                ]
                sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
            seconds, report = _consume(
                "--sqs-queue-url", queue_url, "--sqs-endpoint-url", moto.endpoint, "--wait-seconds", "0"
            )
            if f"deleted={len(keys)}" not in report or f"started={len(keys)}" not in report:
                raise RuntimeError(f"the SQS consumer did not apply every event: {report}")
            return len(keys) / seconds

        # A warm-up round of each (imports, connections, the SDK's client), not counted.
        r2_round(_fresh_objects(user, s3, moto.bucket, 10, data))
        sqs_round(_fresh_objects(user, s3, moto.bucket, 10, data))
        r2_rates, sqs_rates, ratios = [], [], []
        for n in range(rounds):
            r2_keys = _fresh_objects(user, s3, moto.bucket, events, data)
            sqs_keys = _fresh_objects(user, s3, moto.bucket, events, data)
            if n % 2:  # alternate which goes first: neither always meets a warmer machine
                sqs_rate, r2_rate = sqs_round(sqs_keys), r2_round(r2_keys)
            else:
                r2_rate, sqs_rate = r2_round(r2_keys), sqs_round(sqs_keys)
            r2_rates.append(r2_rate)
            sqs_rates.append(sqs_rate)
            ratios.append(r2_rate / sqs_rate)
            print(f"round {n}: r2 {r2_rate:.0f}/s sqs {sqs_rate:.0f}/s", file=sys.stderr, flush=True)
        emit(
            {
                "r2_consumer_events_per_s": r(median(r2_rates), 1),
                "sqs_consumer_events_per_s": r(median(sqs_rates), 1),
                "r2_vs_sqs_consumer_ratio": r(median(ratios)),
                "r2_consumer": {
                    "events_per_round": events,
                    "rounds": rounds,
                    "batch_size": 10,
                    "database": "postgresql",
                    "load_average_1m_5m": [round(x, 2) for x in os.getloadavg()[:2]],
                },
            }
        )
    finally:
        parent.send(None)
        fake_proc.join(10)
        moto.stop()
        from django.db import connections

        connections.close_all()
        db.drop()


def _aws_keys() -> dict[str, str]:
    return {
        "aws_access_key_id": AWS_BENCH_KEYS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": AWS_BENCH_KEYS["AWS_SECRET_ACCESS_KEY"],
    }


if __name__ == "__main__":
    main()
