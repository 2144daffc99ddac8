"""Start the wedding host beside a running Airlock: check what it needs, migrate its own DB, serve."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from airlock_client import AirlockError, Client

MANAGE = Path(__file__).resolve().parents[3] / "manage.py"


class Command(BaseCommand):
    help = "Serve the wedding example (Django's development server) talking to Airlock at --airlock."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--airlock", default=settings.AIRLOCK_URL, help="Airlock's base URL")
        parser.add_argument("--port", type=int, default=8002)
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument(
            "--token",
            default=settings.AIRLOCK_TOKEN,
            help="the wedding host user's Airlock API token (createuser's last line); default: WEDDING_AIRLOCK_TOKEN",
        )
        parser.add_argument(
            "--webhook-secret",
            default=settings.AIRLOCK_WEBHOOK_SECRET,
            help="the whsec_… secret Airlock signs webhooks with; default: WEDDING_WEBHOOK_SECRET",
        )
        parser.add_argument(
            "--media-origin",
            action="append",
            default=list(settings.MEDIA_ORIGINS),
            help="another origin the browser loads photos and videos from (the S3 endpoint), for the CSP",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if not hasattr(Client, "create_upload_link"):
            raise CommandError("the installed airlock-client has no upload links: pip install -e clients/python")
        airlock = opts["airlock"].rstrip("/")
        if not opts["token"]:
            raise CommandError(
                "no Airlock token: pass --token (or WEDDING_AIRLOCK_TOKEN); "
                "make one with `manage.py createuser wedding --tenant wedding` in Airlock"
            )
        if not opts["webhook_secret"].startswith("whsec_"):
            raise CommandError("no webhook secret: pass --webhook-secret whsec_… (Airlock's AIRLOCK_WEBHOOK_SECRET)")
        try:
            with Client(airlock, opts["token"], timeout=10.0, max_retries=1) as client:
                client.usage()  # the token works and Airlock answers
        except AirlockError as refused:
            raise CommandError(f"Airlock at {airlock} refused the token: {refused}") from None
        except httpx.HTTPError as exc:
            raise CommandError(f"Airlock does not answer at {airlock}: {exc}") from None
        call_command("migrate", interactive=False, verbosity=0)
        os.environ.update(
            {
                "WEDDING_AIRLOCK_URL": airlock,
                "WEDDING_AIRLOCK_TOKEN": opts["token"],
                "WEDDING_WEBHOOK_SECRET": opts["webhook_secret"],
                "WEDDING_MEDIA_ORIGINS": ",".join(opts["media_origin"]),
            }
        )
        address = f"{opts['host']}:{opts['port']}"
        self.stdout.write(
            f"wedding: http://{address}/  (Airlock: {airlock}; webhooks: http://{address}/airlock/webhook)"
        )
        sys.stdout.flush()
        # The settings read the environment: the server process starts afresh with it. Django's
        # development server (serving static files without DEBUG: --insecure) is enough for a demo.
        os.execv(sys.executable, [sys.executable, str(MANAGE), "runserver", "--noreload", "--insecure", address])
