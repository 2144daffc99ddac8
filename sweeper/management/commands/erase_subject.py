"""Erase one subject of a tenant: every file of that person let go and removed now (no grace), its client tokens
revoked."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from attachments.retention.services.erasure import ErasureScope, erasure_scope_subject

from ..erase_command import EraseCommand


class Command(EraseCommand):
    help = (
        "Release every file of one subject (the host's id for one of its people) in a tenant, whichever token "
        "made it, and remove its objects now; revoke the client tokens minted for it (the host's API tokens stay). "
        "Held files are skipped and listed. Run with --dry-run first."
    )
    scope_kind = "subject"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug")
        parser.add_argument("subject", help="the subject id, as sent in Airlock-Subject")
        super().add_arguments(parser)

    def scope(self, opts: dict[str, Any]) -> ErasureScope:
        return erasure_scope_subject(tenant=opts["tenant"], subject=opts["subject"])
