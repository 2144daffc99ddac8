"""Rescan ready files with the signatures in force, without ever hiding them."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sweeper.rescans import RescansOff, rescan_request
from sweeper.since import parse_since


class Command(BaseCommand):
    help = (
        "Flag ready files for a rescan: serve's background rescan scans them again, newest first, within "
        "AIRLOCK_RATE_LIMITS' rescan_files_per_minute. They stay ready and served; only a new hit takes one down "
        "(rejected/malware, quarantined, attachment.rejected webhook)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--since",
            default=None,
            help="created at or after: ISO date or datetime, or a duration (90m, 36h, 7d, 2w); "
            "default: every ready file",
        )
        parser.add_argument("--profile", default=None)
        parser.add_argument("--dry-run", action="store_true", help="count the selection, change nothing")
        parser.add_argument("--json", action="store_true", help="print the report as one JSON object")

    def handle(self, *args: Any, **opts: Any) -> None:
        from attachments.bootstrap import require_migrated
        from attachments.profiles import all_profiles

        if opts["profile"] and opts["profile"] not in all_profiles():
            raise CommandError(f"--profile: unknown profile {opts['profile']!r}")
        try:
            since = parse_since(str(opts["since"])) if opts["since"] else None
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        require_migrated("rescan")
        try:
            report = rescan_request(profile=opts["profile"] or None, since=since, dry_run=bool(opts["dry_run"]))
        except RescansOff as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(json.dumps(report.to_dict(), default=str) if opts["json"] else report.summary())
