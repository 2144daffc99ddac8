"""Create a user in a tenant and print its API token on the last line."""

from __future__ import annotations

import re
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from attachments.services.staff import user_create

_TENANT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


class Command(BaseCommand):
    help = "Create a user (and its tenant if needed); print the API token on the last line."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--staff", action="store_true")
        parser.add_argument(
            "--moderator",
            action="store_true",
            help="staff member in the moderator group, for the files of --tenant only",
        )
        parser.add_argument(
            "--platform",
            action="store_true",
            help="platform staff: sees and acts on every tenant in the admin (with --moderator)",
        )
        parser.add_argument("--superuser", action="store_true")
        parser.add_argument("--password")
        parser.add_argument("--email", default="")

    def handle(self, *args, **opts):
        from attachments.bootstrap import require_migrated

        require_migrated("createuser")
        tenant_slug = opts["tenant"].strip().lower()
        if not _TENANT.match(tenant_slug):
            raise CommandError("--tenant must be lowercase letters, digits, '-' or '_' (max 63)")
        User = get_user_model()
        name = opts["name"]
        if User.objects.filter(username=name).exists():
            raise CommandError(f"user {name!r} already exists")
        staff = opts["staff"] or opts["moderator"] or opts["platform"] or opts["superuser"]
        password = opts["password"]
        generated = staff and not password
        if generated:
            password = secrets.token_urlsafe(12)
        _, key = user_create(
            name=name,
            tenant_slug=tenant_slug,
            password=password,
            email=opts["email"],
            staff=staff,
            superuser=opts["superuser"],
            moderator=opts["moderator"],
            platform=opts["platform"],
        )
        if generated:
            self.stdout.write(f"password: {password}")
        self.stdout.write(f"created {name} in tenant {tenant_slug}")
        self.stdout.write(key)  # the only time the key is shown: it is stored as a digest
