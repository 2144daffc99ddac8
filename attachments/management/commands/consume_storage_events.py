"""Long-poll an SQS queue of S3 event notifications and record them.

A message is deleted only after its records are in the inbox; a message that
is not an S3 event document is dead-lettered (DeadLetter kind "message") and
deleted; one that keeps failing is dead-lettered after --max-receives tries.
"""

from __future__ import annotations

import signal
import time

from django.core.management.base import BaseCommand, CommandParser

from attachments.services.handoff import command_enqueues
from attachments.services.storage_events import ConsumeReport, sqs_client, sqs_consume_batch


class Command(BaseCommand):
    help = "Consume S3 event notifications from SQS (S3 → SQS) into the storage-event inbox."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sqs-queue-url", required=True, help="The queue S3 notifies.")
        parser.add_argument(
            "--once",
            action="store_true",
            help="Drain what is in the queue now (until a receive comes back empty), then exit.",
        )
        parser.add_argument(
            "--wait-seconds", type=int, default=20, help="Long-poll wait per receive, 0-20 (default 20)."
        )
        parser.add_argument("--max-messages", type=int, default=10, help="Messages per receive, 1-10 (default 10).")
        parser.add_argument(
            "--max-receives",
            type=int,
            default=5,
            help="Dead-letter a message that failed this many deliveries (default 5).",
        )
        parser.add_argument("--region", default=None, help="SQS region (default AIRLOCK_S3_REGION).")
        parser.add_argument(
            "--sqs-endpoint-url", default=None, help="SQS endpoint (only for stand-ins such as moto or ElasticMQ)."
        )

    def handle(self, *args, **options) -> None:
        from attachments.bootstrap import require_migrated

        require_migrated("consume_storage_events")
        # Its intake jobs: on the embedded default they go to the running serve through the outbox.
        handoff = command_enqueues("consume_storage_events", require_serve=False)
        if handoff.note:
            self.stderr.write(handoff.note)
        client = sqs_client(region=options["region"], endpoint_url=options["sqs_endpoint_url"])
        stopping = {"now": False}

        def stop(signum, frame):  # finish the batch in hand, then leave
            stopping["now"] = True

        if not options["once"]:
            signal.signal(signal.SIGTERM, stop)
            signal.signal(signal.SIGINT, stop)
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
                self.stdout.write(self._line(batch))
            if options["once"] and batch.messages == 0:
                break
        self.stdout.write(self._line(total))

    @staticmethod
    def _line(report: ConsumeReport) -> str:
        outcomes = " ".join(f"{name}={count}" for name, count in sorted(report.outcomes.items()))
        return (
            f"messages={report.messages} records={report.records} deleted={report.deleted} "
            f"dead_lettered={report.dead_lettered} left_for_retry={report.left_for_retry}"
            + (f" {outcomes}" if outcomes else "")
        )
