from django.apps import AppConfig


class OpsConfig(AppConfig):
    """Running Airlock: health, readiness, metrics, logs, the job runtime and `manage.py serve`."""

    name = "ops"
