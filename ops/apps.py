import logging

from django.apps import AppConfig

log = logging.getLogger("airlock.settings")


class OpsConfig(AppConfig):
    """Running Airlock: health, readiness, metrics, logs, the job runtime and `manage.py serve`."""

    name = "ops"

    def ready(self) -> None:
        from config.settings.env import RENAMED_IN_USE

        for old, new in RENAMED_IN_USE:
            log.warning(f"{old} is read as {new}; set that instead", extra={"variable": old, "now": new})
