"""Erase one tenant: every file of every member let go and removed now (no grace), their API tokens revoked."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from attachments.retention.services.erasure import ErasureScope, erasure_scope_tenant

from ..erase_command import EraseCommand


class Command(EraseCommand):
    help = (
        "Release everything a tenant owns (staged and committed, every status) and remove its objects now, "
        "revoke its members' API tokens; held files are skipped and listed. Run with --dry-run first."
    )
    scope_kind = "tenant"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="tenant slug")
        super().add_arguments(parser)

    def scope(self, opts: dict[str, Any]) -> ErasureScope:
        return erasure_scope_tenant(opts["tenant"])
