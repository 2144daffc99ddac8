from django.apps import AppConfig


class ProcessingConfig(AppConfig):
    name = "processing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from attachments.hooks import register_variant_renderer, register_variant_slot

        from . import actors, transcode_actor  # noqa: F401  (registers the actors with the broker)
        from .fairness import variant_slot
        from .variants import render_variant

        register_variant_renderer(render_variant)
        register_variant_slot(variant_slot)
