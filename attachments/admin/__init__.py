"""The admin: the moderation console (modeladmins, actions, the approval queue), the dashboard page (views, dashboard, charts)."""

from . import modeladmins, upload_links  # noqa: F401  (registers the ModelAdmins with the admin site)
