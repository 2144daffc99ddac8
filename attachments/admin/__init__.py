"""The admin: the moderation console (modeladmins, actions) and the dashboard page.

Importing it registers the ModelAdmins with the admin site, the guest links' (the upload links and their
approval queue, attachments/links/admin.py) among them.
"""

from ..links import admin as links_admin  # noqa: F401
from . import modeladmins  # noqa: F401
