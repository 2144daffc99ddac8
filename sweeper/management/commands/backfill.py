"""Re-run processing for selected attachments, with a progress bar, resumable."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.management.base import (
    BaseCommand,
    CommandError,
    CommandParser,
    OutputWrapper,
)
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from attachments.services.processing import REPROCESS_TRANSITIONS
from sweeper.backfill import Selection, backfill_run


def _since(raw: str) -> datetime:
    value = parse_datetime(raw)
    if value is None:
        day = parse_date(raw)
        if day is None:
            raise CommandError(f"--since: not a date or datetime: {raw!r}")
        value = datetime(day.year, day.month, day.day)
    return value if timezone.is_aware(value) else timezone.make_aware(value, timezone.get_current_timezone())


class ProgressBar:
    """A one-line progress bar on stderr (stdout stays clean for --json)."""

    def __init__(self, stream: OutputWrapper, width: int = 30) -> None:
        self.stream, self.width = stream, width

    def __call__(self, done: int, total: int) -> None:
        filled = self.width if total == 0 else min(self.width, self.width * done // max(total, 1))
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total}", ending="")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("")


class Command(BaseCommand):
    help = ("Re-run processing: without --rescan only attachments missing a derivative their profile "
            "promises; with --rescan every selected one. Resumes an interrupted run of the same selection.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--profile", default=None)
        parser.add_argument("--since", default=None, help="created at or after (ISO date or datetime)")
        parser.add_argument("--status", default="ready", choices=sorted(REPROCESS_TRANSITIONS))
        parser.add_argument("--rescan", action="store_true", help="re-process every selected attachment")
        parser.add_argument("--limit", type=int, default=None)
        parser.add_argument("--batch", type=int, default=100)
        parser.add_argument("--restart", action="store_true", help="ignore the checkpoint, start over")
        parser.add_argument("--dry-run", action="store_true", help="count the selection, change nothing")
        parser.add_argument("--no-progress", action="store_true")
        parser.add_argument("--json", action="store_true", help="print the report as one JSON object")

    def handle(self, *args: Any, **opts: Any) -> None:
        from attachments.bootstrap import require_migrated
        from attachments.profiles import all_profiles

        if opts["profile"] and opts["profile"] not in all_profiles():
            raise CommandError(f"--profile: unknown profile {opts['profile']!r}")
        require_migrated("backfill")
        selection = Selection(status=str(opts["status"]), profile=opts["profile"] or None,
                              since=_since(str(opts["since"])) if opts["since"] else None,
                              rescan=bool(opts["rescan"]))
        bar = None if opts["no_progress"] else ProgressBar(self.stderr)
        try:
            report = backfill_run(selection, limit=opts["limit"], batch_size=int(opts["batch"]),
                                  dry_run=bool(opts["dry_run"]), restart=bool(opts["restart"]), progress=bar)
        finally:
            if bar is not None:
                bar.close()
        if opts["json"]:
            self.stdout.write(json.dumps(report.to_dict(), default=str))
        else:
            self.stdout.write(report.summary())
