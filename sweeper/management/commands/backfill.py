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

from attachments.services.handoff import ServeNotRunning, command_enqueues
from attachments.services.processing import REPROCESS_TRANSITIONS
from sweeper.backfill import Selection, backfill_run
from sweeper.rescans import RescansOff
from sweeper.since import parse_since


def _since(raw: str) -> datetime:
    try:
        return parse_since(raw)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc


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
    help = (
        "Re-run processing for attachments missing a derivative their profile promises (resumes an "
        "interrupted run of the same selection). With --rescan, flag every selected ready file for the "
        "background rescan instead: they stay ready and served (same as `manage.py rescan`)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--profile", default=None)
        parser.add_argument(
            "--since", default=None, help="created at or after (ISO date or datetime, or a duration: 90m, 36h, 7d, 2w)"
        )
        parser.add_argument("--status", default="ready", choices=sorted(REPROCESS_TRANSITIONS))
        parser.add_argument(
            "--rescan",
            action="store_true",
            help="flag every selected ready file for the background rescan (files stay served)",
        )
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
        selection = Selection(
            status=str(opts["status"]),
            profile=opts["profile"] or None,
            since=_since(str(opts["since"])) if opts["since"] else None,
            rescan=bool(opts["rescan"]),
        )
        if selection.rescan and selection.status != "ready":
            raise CommandError("--rescan applies to ready files only (failed ones are retried without it)")
        if not selection.rescan and not opts["dry_run"]:
            try:  # files go back to pending: someone must run their jobs now
                handoff = command_enqueues("backfill", require_serve=True)
            except ServeNotRunning as exc:
                raise CommandError(str(exc)) from exc
            if handoff.note:
                self.stderr.write(handoff.note)
        bar = None if opts["no_progress"] else ProgressBar(self.stderr)
        try:
            report = backfill_run(
                selection,
                limit=opts["limit"],
                batch_size=int(opts["batch"]),
                dry_run=bool(opts["dry_run"]),
                restart=bool(opts["restart"]),
                progress=bar,
            )
        except RescansOff as exc:
            raise CommandError(str(exc)) from exc
        finally:
            if bar is not None:
                bar.close()
        if opts["json"]:
            self.stdout.write(json.dumps(report.to_dict(), default=str))
        else:
            self.stdout.write(report.summary())
