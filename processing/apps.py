from django.apps import AppConfig


class ProcessingConfig(AppConfig):
    name = "processing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import actors  # noqa: F401  (registers the actors with the broker)
