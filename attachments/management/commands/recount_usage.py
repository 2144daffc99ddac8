"""Rebuild tenants' quota counters from their files and print what changed."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from attachments.models import Tenant
from attachments.services.quotas import tenant_usage_recount


class Command(BaseCommand):
    help = "Set each tenant's usage counter (quotas) to the sum of its counted files; print the tenants that drifted."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="only this tenant (slug)")

    def handle(self, *args, **opts):
        from attachments.bootstrap import require_migrated

        require_migrated("recount_usage")
        tenants = Tenant.objects.order_by("slug")
        if opts["tenant"]:
            tenants = tenants.filter(slug=opts["tenant"])
            if not tenants.exists():
                raise CommandError(f"no tenant {opts['tenant']!r}")
        drifted = 0
        for slug, pk in tenants.values_list("slug", "pk"):
            before, after = tenant_usage_recount(tenant_id=pk)
            if before != after:
                drifted += 1
                self.stdout.write(f"{slug}: bytes {before[0]} -> {after[0]}, files {before[1]} -> {after[1]}")
        self.stdout.write(f"{drifted} of {tenants.count()} tenants recounted")
