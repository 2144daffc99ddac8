"""Where an app's writes live: its `services/` package and each concern package's services.

An app's services are `<app>/services/…` and, in a concern package of the app
(a folder per concern, docs/architecture.md: attachments/variants/, …),
`<app>/<concern>/services.py` or `<app>/<concern>/services/…`: the app-level rule
one level down. Every other module of a concern (api.py, admin.py, views.py,
selectors.py, spec.py, permissions.py, …) is outside, and so are the app's layer
folders (api/, admin/, management/), even for a module named services. The write
guard (test_one_home_for_writes.py) and the storage-backend guard
(test_storage_backends.py) read the services through this one rule.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The apps whose rows are guarded. The product's accounts (django.contrib.auth's users and
# groups) are the attachments app's: tenants, memberships and staff are made there.
HOMES = {"attachments": ROOT / "attachments" / "services", "webhooks": ROOT / "webhooks" / "services"}
# An app's folders by layer rather than by concern: nothing in them is a home, whatever its name.
LAYER_FOLDERS = {"api", "admin", "management", "migrations", "templatetags", "static", "templates"}


def home_of(path: Path) -> str | None:
    """The app whose rows and transitions `path` may write, or None (module docstring)."""
    try:
        app, *rest = path.relative_to(ROOT).parts
    except ValueError:
        return None
    if app not in HOMES or not rest:
        return None
    if rest[0] == "services" and len(rest) > 1:
        return app
    concern_services = (len(rest) == 2 and rest[1] == "services.py") or (len(rest) > 2 and rest[1] == "services")
    if rest[0] not in LAYER_FOLDERS and rest[0] != "services" and concern_services:
        return app
    return None


def service_modules(app: str) -> list[Path]:
    """Every module of the app's services, its concerns' included."""
    return sorted(path for path in (ROOT / app).rglob("*.py") if home_of(path) == app)
