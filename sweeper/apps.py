from django.apps import AppConfig


class SweeperConfig(AppConfig):
    name = "sweeper"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from attachments.brakes import register_delete_brake

        from .control import delete_brake

        register_delete_brake(delete_brake)  # attachments' own deletes obey the same brakes
