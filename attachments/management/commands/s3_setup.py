"""Show (--dry-run) or fix (--apply) the S3 bucket's CORS and multipart-abort lifecycle rule."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from attachments.services.bucket_setup import bucket_setup_apply, bucket_setup_plan
from attachments.storage import StorageError


class Command(BaseCommand):
    help = (
        "Compare the bucket's CORS (AIRLOCK_CORS_ALLOWED_ORIGINS) and its AbortIncompleteMultipartUpload "
        "lifecycle rule with what Airlock needs; --dry-run prints the drift, --apply fixes it. "
        "Other rules on the bucket are kept. On R2 it also prints the wrangler commands for its event notifications."
    )

    def add_arguments(self, parser):
        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument("--dry-run", action="store_true", help="print the drift, change nothing")
        mode.add_argument("--apply", action="store_true", help="write Airlock's rules where they drifted")
        parser.add_argument(
            "--r2-queue",
            default=None,
            help="R2: the Cloudflare Queue its notifications go to, in the wrangler commands (default <bucket>-events)",
        )

    def handle(self, *args, **opts):
        try:
            queue = opts["r2_queue"]
            plan = bucket_setup_apply(queue=queue) if opts["apply"] else bucket_setup_plan(queue=queue)
        except StorageError as exc:
            raise CommandError(str(exc)) from exc
        verb = "fixed" if opts["apply"] else "drift"
        for line in plan.drift:
            self.stdout.write(f"{verb}: {line}")
        if not plan.drift:
            self.stdout.write(f"bucket {plan.bucket}: no drift")
        elif opts["apply"]:
            self.stdout.write(f"bucket {plan.bucket}: {len(plan.drift)} rule(s) written")
        else:
            self.stdout.write(f"bucket {plan.bucket}: {len(plan.drift)} rule(s) differ; run with --apply to fix")
        if plan.manual_steps:
            self.stdout.write(
                "R2 does not set these through its S3 API (event notifications, their queue and its "
                "dead-letter queue); run once with wrangler, then `consume_storage_events --cloudflare-queue "
                "ACCOUNT_ID/QUEUE_ID` (or the Worker in docs/r2.md):"
            )
            for step in plan.manual_steps:
                self.stdout.write(f"  {step}")
