"""Reap expired and discarded uploads now (cron calls this; the in-process tick calls sweep_if_due)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from attachments.services.handoff import command_enqueues
from sweeper.sweep import sweep_expired


class Command(BaseCommand):
    help = "Delete the storage objects of expired or discarded uncommitted uploads and mark their rows deleted."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="record what would be deleted, delete nothing")
        parser.add_argument("--limit", type=int, default=None, help="handle at most N rows")
        parser.add_argument("--json", action="store_true", help="print the report as one JSON object")

    def handle(self, *args: Any, **opts: Any) -> None:
        from attachments.bootstrap import require_migrated

        limit = opts["limit"]
        if limit is not None and int(limit) < 1:
            raise CommandError("--limit must be at least 1")
        require_migrated("sweep")
        if not opts["dry_run"]:  # its jobs (re-drives, webhooks): on the embedded default, the running serve's
            handoff = command_enqueues("sweep", require_serve=False)
            if handoff.note:
                self.stderr.write(handoff.note)
        report = sweep_expired(dry_run=bool(opts["dry_run"]), limit=limit, trigger="command")
        if opts["json"]:
            self.stdout.write(json.dumps(report.to_dict(), default=str))
            return
        self.stdout.write(report.summary())
        for key in report.would_delete:
            self.stdout.write(f"  would delete {key}")
        for line in report.error_messages[:50]:
            self.stdout.write(f"  error: {line}")
