from django.apps import AppConfig


class SweeperConfig(AppConfig):
    name = "sweeper"
    default_auto_field = "django.db.models.BigAutoField"
