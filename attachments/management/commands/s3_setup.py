"""Show (--dry-run) or fix (--apply) the S3 bucket's CORS and multipart-abort lifecycle rule."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from attachments.services.bucket_setup import bucket_setup_apply, bucket_setup_plan
from attachments.storage import StorageError


class Command(BaseCommand):
    help = (
        "Compare the bucket's CORS (AIRLOCK_CORS_ALLOWED_ORIGINS) and its AbortIncompleteMultipartUpload "
        "lifecycle rule with what Airlock needs; --dry-run prints the drift, --apply fixes it. "
        "Other rules on the bucket are kept."
    )

    def add_arguments(self, parser):
        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument("--dry-run", action="store_true", help="print the drift, change nothing")
        mode.add_argument("--apply", action="store_true", help="write Airlock's rules where they drifted")

    def handle(self, *args, **opts):
        try:
            plan = bucket_setup_apply() if opts["apply"] else bucket_setup_plan()
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
