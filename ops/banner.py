"""The admin banner: what staff should know is not running normally, on every admin page.

The list is `attachments.notices.service_notices` (paused uploads, brakes, dead
letters) plus the two states only `/readyz` knows (scanner reachable,
confinement in force), computed by the same checks. The banner is cached for
CACHE_SECONDS so an admin page never costs a clamd round trip: the scanner is
pinged at most once per that window per cache.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.cache import cache
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

from attachments.notices import Notice, service_notices
from attachments.staff_scope import is_platform_staff, staff_tenant_id

from . import health

# Short enough that staff see a fixed scanner or a lifted brake on their next page or so.
CACHE_SECONDS = 5.0
# The banner's own timeout for a scanner ping: an admin page must not wait the readiness timeout.
PING_TIMEOUT_SECONDS = 1.0
log = logging.getLogger("airlock.admin")
DASHBOARD_OWN_KINDS = ("uploads_paused", "brake")


def cache_seconds() -> float:
    return CACHE_SECONDS


def dependency_notices() -> list[Notice]:
    """Scanner down or confinement weaker than asked, as /readyz reports them."""
    notices = []
    try:
        health.check_scanners(timeout=PING_TIMEOUT_SECONDS)
    except Exception as exc:  # noqa: BLE001 - whatever stops the ping means "unavailable"
        notices.append(
            Notice(
                "scanner", f"The scanner is unavailable ({exc}): uploads wait, nothing is served unscanned.", "readyz"
            )
        )
    try:
        state = health.check_sandbox()["state"]
    except Exception as exc:  # noqa: BLE001 - refused (no decoder job runs) or misconfigured
        notices.append(Notice("confinement", f"Confinement is refused: no decoder job runs here ({exc}).", "readyz"))
    else:
        if state.startswith("degraded"):
            notices.append(Notice("confinement", f"Confinement is {state}.", "readyz"))
    return notices


def _cached(key: str, compute) -> list[Notice]:
    seconds = cache_seconds()
    if seconds <= 0:
        return compute()
    found = cache.get(key)
    if found is None:
        found = compute()
        cache.set(key, found, seconds)
    return found


def banner_notices(user) -> list[Notice]:
    """What this staff member should see: their tenant's notices (every tenant's for platform staff)."""
    platform = is_platform_staff(user)
    tenant_id = None if platform else staff_tenant_id(user)
    if not platform and tenant_id is None:
        return []
    tenant_part = _cached(
        f"airlock:banner:tenant:{tenant_id or 'all'}", lambda: service_notices(tenant_id=tenant_id, staff=True)
    )
    return [*tenant_part, *_cached("airlock:banner:dependencies", dependency_notices)]


def _link(notice: Notice) -> str:
    if not notice.fix_url:
        return ""
    try:
        url = reverse(notice.fix_url)
    except NoReverseMatch:
        return ""
    return f"{url}?{notice.fix_query}" if notice.fix_query else url


def admin_banner(request: HttpRequest) -> dict[str, Any]:
    """Context processor: `airlock_banner`, a list of {kind, message, link} on admin pages for staff."""
    user = getattr(request, "user", None)
    if user is None or not getattr(user, "is_staff", False) or not request.path.startswith("/admin/"):
        return {}
    try:
        notices = banner_notices(user)
    except Exception:  # a banner must never take the admin down with it
        log.exception("admin banner unavailable")
        return {}
    match = getattr(request, "resolver_match", None)
    if match is not None and match.url_name == "admin-dashboard":
        # The dashboard lists paused uploads and brakes in its own panel: the banner adds only the rest.
        notices = [n for n in notices if n.kind not in DASHBOARD_OWN_KINDS]
    return {"airlock_banner": [{"kind": n.kind, "message": n.message, "link": _link(n)} for n in notices]}
