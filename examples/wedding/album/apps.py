from django.apps import AppConfig


class AlbumConfig(AppConfig):
    name = "album"
    default_auto_field = "django.db.models.BigAutoField"
