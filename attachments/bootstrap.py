"""Migrations are applied by `manage.py migrate`, never behind an operator's back.

Only `serve` migrates by itself, as a first-run convenience: on the embedded
default (SQLite), or on a database that has no migration applied at all (a
brand-new install: nothing there to lock). Every other command refuses to run
while a migration is pending, before it touches anything: a cron `sweep`
must not apply a migration that locks large tables the minute it is deployed.
"""

from __future__ import annotations

import logging
from pathlib import Path

from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

log = logging.getLogger("airlock.bootstrap")


def _sqlite_file() -> Path | None:
    """The embedded database's file (None for another database or an in-memory one)."""
    if connection.vendor != "sqlite":
        return None
    name = str(connection.settings_dict["NAME"])
    return None if name == ":memory:" or name.startswith("file:") else Path(name)


def pending_migrations() -> tuple[list[str], bool]:
    """(the migrations not applied yet, whether none at all is applied). Creates nothing."""
    path = _sqlite_file()
    if path is not None and not path.exists():
        # Opening SQLite would create the file: report "nothing applied" without touching it.
        from django.db.migrations.loader import MigrationLoader

        loader = MigrationLoader(None, ignore_no_migrations=True)
        return [f"{app}.{name}" for app, name in sorted(loader.disk_migrations)], True
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{m.app_label}.{m.name}" for m, _backwards in plan], not executor.loader.applied_migrations


def require_migrated(command: str) -> None:
    """Refuse (CommandError, nothing changed) while the database has unapplied migrations."""
    pending, _fresh = pending_migrations()
    if pending:
        shown = ", ".join(pending[:3]) + (f" and {len(pending) - 3} more" if len(pending) > 3 else "")
        raise CommandError(
            f"{command}: the database has {len(pending)} unapplied migration(s) ({shown}). "
            f"Run `python manage.py migrate` first (see docs/deployment.md); nothing was changed."
        )


def migrate_on_first_run() -> None:
    """`serve` only: migrate the embedded default or a brand-new database, and say so; else refuse."""
    from django.conf import settings

    pending, fresh = pending_migrations()
    if not pending:
        return
    if _sqlite_file() is None and not fresh:
        require_migrated("serve")
    if connection.vendor == "sqlite":
        from .private_files import private_dir

        private_dir(settings.AIRLOCK_DATA_DIR)
    log.warning(
        "first run: applying migrations (only serve does this, and only on the embedded default or "
        "a new database; otherwise run `manage.py migrate`)",
        extra={"migrations": len(pending), "database": connection.vendor},
    )
    call_command("migrate", interactive=False, verbosity=0)
