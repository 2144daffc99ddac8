"""Admin-only views: the dashboard and the staff thumbnail preview."""

from __future__ import annotations

from typing import cast

from django.contrib import admin
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.template.response import TemplateResponse

from . import charts
from .dashboard import dashboard_snapshot
from ..models import Attachment, Derivative, Lifecycle
from ..serving import file_response
from ..staff_scope import is_platform_staff, scoped, staff_tenant_id

VIEW_PERMISSION = "attachments.view_attachment"


def _format_seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


def dashboard(request: HttpRequest) -> HttpResponse:
    """GET /admin/dashboard/: the pipeline at a glance (wrapped by admin_view in urls)."""
    if not request.user.has_perm(VIEW_PERMISSION):
        raise PermissionDenied
    period = request.GET.get("period", "24h")
    tenant_id = staff_tenant_id(request.user)
    if tenant_id is None and not is_platform_staff(request.user):
        raise PermissionDenied  # staff bound to no tenant and not platform staff: nothing to show
    snapshot = dashboard_snapshot(period=period, tenant_id=tenant_id)
    label_format = "%H:%M" if snapshot.period == "24h" else "%b %d"
    timeline_chart = charts.stacked_bars([(b.start, b.counts) for b in snapshot.timeline],
                                         label_format=label_format)
    context = {
        **admin.site.each_context(request),
        "title": "Pipeline dashboard" + (f" — tenant {_tenant_slug(request)}" if tenant_id else ""),
        "snapshot": snapshot,
        "timeline_chart": timeline_chart,
        "timeline_total": sum(b.total for b in snapshot.timeline),
        "distribution_chart": charts.horizontal_bars(snapshot.distribution),
        "latencies": [
            {"window": lat.window, "count": lat.count, "p50": _format_seconds(lat.p50),
             "p95": _format_seconds(lat.p95), "p99": _format_seconds(lat.p99)}
            for lat in snapshot.latencies
        ],
        "oldest_pending": (_format_seconds(snapshot.oldest_pending.total_seconds())
                           if snapshot.oldest_pending is not None else "none"),
        "periods": [("24h", "last 24 hours, hourly"), ("14d", "last 14 days, daily")],
    }
    return TemplateResponse(request, "admin/attachments/dashboard.html", context)


def _tenant_slug(request: HttpRequest) -> str:
    # admin_view let only an authenticated staff member in: request.user is a User
    return cast(User, request.user).membership.tenant.slug


def staff_thumbnail_of(attachment: Attachment) -> Derivative | None:
    """The only rendition staff preview: the re-rendered thumbnail, never the original.

    A thumbnail exists only for content that passed scanning and was decoded in
    the sandbox, so it stays viewable after a takedown (a moderator must see what
    they restore); nothing is shown once the attachment is deleted.
    """
    if attachment.lifecycle == Lifecycle.DELETED:
        return None
    return attachment.derivatives.filter(kind="thumbnail").first()


def staff_thumbnail(request: HttpRequest, object_id: str) -> HttpResponseBase:
    """Stream the thumbnail derivative with the serving path's security headers."""
    if not request.user.has_perm(VIEW_PERMISSION):
        raise PermissionDenied
    attachment = scoped(Attachment.objects.all(), request.user).filter(pk=object_id).first()
    thumbnail = staff_thumbnail_of(attachment) if attachment is not None else None
    if attachment is None or thumbnail is None:
        raise Http404("no thumbnail")
    stem = attachment.filename.rsplit(".", 1)[0] or "thumbnail"
    return file_response(request, key=thumbnail.storage_key, size=thumbnail.size,
                         content_type=thumbnail.content_type, filename=f"{stem}.webp", inline=True)
