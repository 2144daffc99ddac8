"""Erase one tenant: every file of every member let go and removed now (no grace), their API tokens revoked."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from attachments.services.erasure import ErasureSubject, erasure_subject_tenant

from ..erase_command import EraseCommand


class Command(EraseCommand):
    help = (
        "Release everything a tenant owns (staged and committed, every status) and remove its objects now, "
        "revoke its members' API tokens; held files are skipped and listed. Run with --dry-run first."
    )
    subject_kind = "tenant"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="tenant slug")
        super().add_arguments(parser)

    def subject(self, opts: dict[str, Any]) -> ErasureSubject:
        return erasure_subject_tenant(opts["tenant"])
