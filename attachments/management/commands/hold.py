"""Retention (legal) holds from the shell: set, clear or list holds on files and refs.

Whoever runs manage.py is platform staff by definition (the shell reaches every
tenant); the actor in the audit log is `command:hold:<operator>`.
"""

from __future__ import annotations

import getpass
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from attachments.bootstrap import require_migrated
from attachments.errors import AirlockError
from attachments.retention.services.holds import (
    attachment_hold_clear,
    attachment_hold_set,
    holds_list,
    ref_hold_clear,
    ref_hold_set,
)


class Command(BaseCommand):
    help = (
        "Legal holds: `hold set --id ID … --reason R`, `hold set --tenant T --ref REF --reason R`, "
        "`hold clear` with the same target, `hold list [--tenant T]`. A held file survives every delete path."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=("set", "clear", "list"))
        parser.add_argument("--id", dest="ids", action="append", default=[], help="an attachment id (repeatable)")
        parser.add_argument("--tenant", default=None, help="the tenant slug (a ref hold, or to filter the list)")
        parser.add_argument("--ref", default=None, help="hold every file of this ref of --tenant")
        parser.add_argument("--reason", default="", help="why (required to set; kept in the audit log)")
        parser.add_argument("--operator", default="", help="who acts, for the audit log (default: the login name)")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args: Any, **opts: Any) -> None:
        require_migrated("hold")
        try:
            result = self._run(opts)
        except AirlockError as exc:
            raise CommandError(f"hold {opts['action']}: {exc.message} {exc.details or ''}".strip()) from exc
        if opts["json"]:
            self.stdout.write(json.dumps(result, default=str))
        elif opts["action"] == "list":
            for row in result:
                self.stdout.write(
                    f"{row['kind']}\t{row['tenant']}\t{row['target']}\t{row['by']}\t{row['at']}\t{row['reason']}"
                )
        else:
            self.stdout.write(f"hold {opts['action']}: {result}")

    def _run(self, opts: dict[str, Any]) -> Any:
        action, ids, tenant, ref = opts["action"], opts["ids"], opts["tenant"], opts["ref"]
        if action == "list":
            return [vars(row) for row in holds_list(tenant=tenant)]
        if bool(ids) == bool(ref):
            raise CommandError(f"hold {action}: give --id (one or more) or --tenant with --ref, not both")
        if ref and not tenant:
            raise CommandError(f"hold {action}: --ref needs --tenant")
        actor = f"command:hold:{opts['operator'] or _login()}"
        if action == "set":
            if ref:
                hold = ref_hold_set(tenant=tenant, ref=ref, actor=actor, reason=opts["reason"])
                return {"tenant": tenant, "ref": hold.ref, "held_since": hold.created_at, "by": hold.created_by}
            return {"held": attachment_hold_set(attachment_ids=ids, actor=actor, reason=opts["reason"])}
        if ref:
            return {"tenant": tenant, "ref": ref, "cleared": ref_hold_clear(tenant=tenant, ref=ref, actor=actor)}
        return {"cleared": attachment_hold_clear(attachment_ids=ids, actor=actor, reason=opts["reason"])}


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
