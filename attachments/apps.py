from django.apps import AppConfig


class AttachmentsConfig(AppConfig):
    name = "attachments"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import signals  # noqa: F401
