"""Find drift between storage and the database and repair it; print the report."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from attachments.services.handoff import command_enqueues
from sweeper.reconcile import reconcile_storage


class Command(BaseCommand):
    help = (
        "Delete orphaned objects past the grace window, delete leftovers of deleted rows and expired "
        "quarantine, re-drive lost arrivals, pending jobs and expired leases; fail ready files whose original "
        "is gone (object_missing), re-derive those missing only derivatives, abort orphan multipart uploads."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="report what would be done, change nothing")
        parser.add_argument(
            "--quarantine-orphans",
            action="store_true",
            help="move orphaned objects to quarantine/ instead of deleting them",
        )
        parser.add_argument("--json", action="store_true", help="print the report as one JSON object")

    def handle(self, *args: Any, **opts: Any) -> None:
        from attachments.bootstrap import require_migrated

        require_migrated("reconcile")
        if not opts["dry_run"]:  # its jobs (re-drives, webhooks): on the embedded default, the running serve's
            handoff = command_enqueues("reconcile", require_serve=False)
            if handoff.note:
                self.stderr.write(handoff.note)
        report = reconcile_storage(dry_run=bool(opts["dry_run"]), quarantine_orphans=bool(opts["quarantine_orphans"]))
        if opts["json"]:
            self.stdout.write(json.dumps(report.to_dict(), default=str))
            return
        for line in report.summary_lines():
            self.stdout.write(line)
