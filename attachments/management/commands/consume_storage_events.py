"""Consume storage notifications from a queue and record them.

Two queues: SQS (S3 → SQS) and a Cloudflare Queue (R2 → Queue, HTTP pull).

SQS: a message is deleted only after its records are in the inbox; a message
that is not an S3 event document is dead-lettered (DeadLetter kind "message")
and deleted; one that keeps failing is dead-lettered after --max-receives tries.

Cloudflare: a message is acked only after its record is in; a failing one is
retried alone with a delay, and the queue's max_retries moves it to its
dead-letter queue. A stop (SIGTERM) leaves unhandled messages leased: their
visibility timeout brings them back.
"""

from __future__ import annotations

import signal
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from attachments.services.cloudflare_queue import (
    PullReport,
    QueueRef,
    cloudflare_client,
    cloudflare_consume_batch,
)
from attachments.services.handoff import command_enqueues
from attachments.services.queue_consumers import queue_consumer_stopped
from attachments.services.storage_events import ConsumeReport, sqs_client, sqs_consume_batch


class Command(BaseCommand):
    help = (
        "Consume storage notifications into the storage-event inbox: S3 → SQS (--sqs-queue-url) or "
        "R2 → a Cloudflare Queue over HTTP pull (--cloudflare-queue, token in AIRLOCK_CLOUDFLARE_API_TOKEN)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--sqs-queue-url", help="The SQS queue S3 notifies.")
        source.add_argument(
            "--cloudflare-queue",
            metavar="ACCOUNT_ID/QUEUE_ID",
            help="The Cloudflare Queue R2 notifies (HTTP pull enabled on it).",
        )
        parser.add_argument(
            "--once",
            action="store_true",
            help="Drain what is in the queue now (until a receive comes back empty), then exit.",
        )
        parser.add_argument(
            "--wait-seconds",
            type=int,
            default=20,
            help="SQS: long-poll wait per receive, 0-20. Cloudflare: pause after an empty pull (default 20).",
        )
        parser.add_argument(
            "--max-messages",
            type=int,
            default=10,
            help="Messages per receive: SQS 1-10, Cloudflare 1-100 (default 10).",
        )
        parser.add_argument(
            "--max-receives",
            type=int,
            default=5,
            help="SQS: dead-letter a message that failed this many deliveries (default 5).",
        )
        parser.add_argument("--region", default=None, help="SQS region (default AIRLOCK_S3_REGION).")
        parser.add_argument(
            "--sqs-endpoint-url", default=None, help="SQS endpoint (only for stand-ins such as moto or ElasticMQ)."
        )
        parser.add_argument(
            "--visibility-timeout-ms",
            type=int,
            default=60_000,
            help="Cloudflare: how long a pulled message is leased to this consumer (default 60000).",
        )
        parser.add_argument(
            "--retry-delay-seconds",
            type=int,
            default=10,
            help="Cloudflare: delay before a failed message comes back, doubled per attempt (default 10).",
        )
        parser.add_argument(
            "--cloudflare-api-url", default=None, help="Cloudflare API base URL (only for a stand-in of the API)."
        )

    def handle(self, *args, **options) -> None:
        from attachments.bootstrap import require_migrated

        require_migrated("consume_storage_events")
        queue = None
        if options["cloudflare_queue"]:
            try:
                queue = QueueRef.parse(options["cloudflare_queue"])
                client = cloudflare_client(
                    api_token=settings.AIRLOCK_CLOUDFLARE_API_TOKEN or "", base_url=options["cloudflare_api_url"]
                )
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
        # Its intake jobs: on the embedded default they go to the running serve through the outbox.
        handoff = command_enqueues("consume_storage_events", require_serve=False)
        if handoff.note:
            self.stderr.write(handoff.note)
        stopping = {"now": False}

        def stop(signum, frame):  # finish the message in hand, ack what is done, then leave
            stopping["now"] = True

        if not options["once"]:
            signal.signal(signal.SIGTERM, stop)
            signal.signal(signal.SIGINT, stop)
        if queue is not None:
            self._cloudflare(client, queue, options, stopping)
        else:
            self._sqs(options, stopping)

    def _cloudflare(self, client, queue: QueueRef, options: dict, stopping: dict) -> None:
        total = PullReport()
        failures = 0
        try:
            while not stopping["now"]:
                try:
                    batch = cloudflare_consume_batch(
                        client=client,
                        queue=queue,
                        batch_size=options["max_messages"],
                        visibility_timeout_ms=options["visibility_timeout_ms"],
                        retry_delay_seconds=options["retry_delay_seconds"],
                        stopping=lambda: stopping["now"],
                    )
                except Exception as exc:  # the API or the database is down: back off, the messages wait
                    if options["once"]:
                        raise
                    failures += 1
                    self.stderr.write(f"consume failed ({type(exc).__name__}: {exc}); retrying")
                    self._pause(min(60, 2 ** min(failures, 6)), stopping)
                    continue
                failures = 0
                total.add(batch)
                if batch.messages and options["verbosity"] >= 2:
                    self.stdout.write(self._line(batch, self._PULL_COUNTS))
                if batch.messages == 0:
                    if options["once"]:
                        break
                    self._pause(max(1, options["wait_seconds"]), stopping)
        finally:
            if not options["once"]:
                queue_consumer_stopped(name=queue.name)
        self.stdout.write(self._line(total, self._PULL_COUNTS))

    @staticmethod
    def _pause(seconds: float, stopping: dict) -> None:
        deadline = time.monotonic() + seconds
        while not stopping["now"] and time.monotonic() < deadline:
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))

    def _sqs(self, options: dict, stopping: dict) -> None:
        client = sqs_client(region=options["region"], endpoint_url=options["sqs_endpoint_url"])
        total = ConsumeReport()
        failures = 0
        while not stopping["now"]:
            try:
                batch = sqs_consume_batch(
                    client=client,
                    queue_url=options["sqs_queue_url"],
                    wait_seconds=options["wait_seconds"],
                    max_messages=options["max_messages"],
                    max_receives=options["max_receives"],
                )
            except Exception as exc:  # SQS or the database is down: back off, the messages wait
                if options["once"]:
                    raise
                failures += 1
                self.stderr.write(f"consume failed ({type(exc).__name__}: {exc}); retrying")
                time.sleep(min(60, 2 ** min(failures, 6)))
                continue
            failures = 0
            total.add(batch)
            if batch.messages and options["verbosity"] >= 2:
                self.stdout.write(self._line(batch, self._COUNTS))
            if options["once"] and batch.messages == 0:
                break
        self.stdout.write(self._line(total, self._COUNTS))

    _PULL_COUNTS = ("messages", "records", "acked", "retried", "left_leased", "backlog")
    _COUNTS = ("messages", "records", "deleted", "dead_lettered", "left_for_retry")

    @staticmethod
    def _line(report: PullReport | ConsumeReport, names: tuple[str, ...]) -> str:
        """`name=value` for each count, then the outcomes by name."""
        words = [f"{name}={getattr(report, name)}" for name in names]
        words += [f"{name}={count}" for name, count in sorted(report.outcomes.items())]
        return " ".join(words)
