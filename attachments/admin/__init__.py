"""The admin: the moderation console (modeladmins, actions), the dashboard page (views, dashboard, charts)."""

from . import modeladmins  # noqa: F401  (registers the ModelAdmins with the admin site)
