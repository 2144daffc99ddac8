"""The admin: the moderation console (modeladmins, actions, the approval queue) and the dashboard page.

Importing it registers the ModelAdmins with the admin site.
"""

from . import modeladmins, upload_links  # noqa: F401
