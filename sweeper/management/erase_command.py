"""What the erase_* commands share: options, the operator as the audit actor, the printed report."""

from __future__ import annotations

import getpass
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from attachments.bootstrap import require_migrated
from attachments.errors import AirlockError
from attachments.retention.services.erasure import ErasureScope

from ..erasure import erase


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in a bare container
        return "unknown"


class EraseCommand(BaseCommand):
    scope_kind = ""  # "user" | "tenant" | "subject"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="report what would be let go and removed; change nothing (run this first)",
        )
        parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
        parser.add_argument(
            "--operator", default="", help="who runs the erasure, for the audit log (default: the login name)"
        )

    def scope(self, opts: dict[str, Any]) -> ErasureScope:
        raise NotImplementedError

    def handle(self, *args: Any, **opts: Any) -> None:
        command = f"erase_{self.scope_kind}"
        require_migrated(command)
        try:
            scope = self.scope(opts)
            report = erase(
                scope, actor=f"command:{command}:{opts['operator'] or _login()}", dry_run=bool(opts["dry_run"])
            )
        except AirlockError as exc:
            raise CommandError(f"{command}: {exc.message}") from exc
        if opts["json"]:
            self.stdout.write(json.dumps(report.to_dict(), default=str))
            return
        for line in report.summary():
            self.stdout.write(line)
