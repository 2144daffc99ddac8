"""Make a fresh machine usable: apply migrations when some are missing."""

from __future__ import annotations

from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def ensure_migrated() -> None:
    from django.conf import settings

    if connection.vendor == "sqlite":
        from .private_files import private_dir

        private_dir(settings.AIRLOCK_DATA_DIR)
    executor = MigrationExecutor(connection)
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        call_command("migrate", interactive=False, verbosity=0)
