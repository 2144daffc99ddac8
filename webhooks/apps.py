from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Webhooks"

    def ready(self) -> None:
        from attachments import hooks

        from . import (
            actors,  # noqa: F401  (registers the delivery actor with the broker)
            signals,  # noqa: F401  (endpoint changes refresh this process's endpoint cache)
        )
        from .services import emit

        hooks.outcome_reached.connect(emit.on_outcome, dispatch_uid="webhooks.emit")
