"""Admin-only views: the dashboard, the staff thumbnail and poster previews, the staff media player's source."""

from __future__ import annotations

import logging
from typing import cast

from django.contrib import admin
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.template.response import TemplateResponse

from .. import renditions
from ..errors import NotFound, Unavailable
from ..models import Attachment, Derivative, Lifecycle, Status
from ..reasons import ReasonCode
from ..services.audit import attachment_staff_download_record
from ..serving import derivative_response, served_response, stem
from ..staff_scope import is_platform_staff, scoped, staff_tenant_id
from ..variants.services.obtain import page_preview_obtain
from . import charts
from .actions import staff_actor
from .dashboard import dashboard_snapshot
from .media import is_media

VIEW_PERMISSION = "attachments.view_attachment"
log = logging.getLogger("airlock.admin")


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
    timeline_chart = charts.stacked_bars([(b.start, b.counts) for b in snapshot.timeline], label_format=label_format)
    context = {
        **admin.site.each_context(request),
        "title": "Pipeline dashboard" + (f" — tenant {_tenant_slug(request)}" if tenant_id else ""),
        "snapshot": snapshot,
        "timeline_chart": timeline_chart,
        "timeline_total": sum(b.total for b in snapshot.timeline),
        "distribution_chart": charts.horizontal_bars(snapshot.distribution),
        "latencies": [
            {
                "window": lat.window,
                "count": lat.count,
                "p50": _format_seconds(lat.p50),
                "p95": _format_seconds(lat.p95),
                "p99": _format_seconds(lat.p99),
            }
            for lat in snapshot.latencies
        ],
        "oldest_pending": (
            _format_seconds(snapshot.oldest_pending.total_seconds()) if snapshot.oldest_pending is not None else "none"
        ),
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
    return staff_derivative_of(attachment, "thumbnail")


def staff_derivative_of(attachment: Attachment, kind: str) -> Derivative | None:
    """A sandbox-made derivative (thumbnail, poster) staff may preview: the thumbnail's rule."""
    if attachment.lifecycle == Lifecycle.DELETED:
        return None
    return attachment.derivatives.filter(kind=kind).first()


def staff_media_of(attachment: Attachment) -> tuple[str, int] | None:
    """The key and size of the video or audio staff may play, or None: a served file the probe accepted."""
    if not is_media(attachment.metadata) or not attachment.content_type.startswith(("video/", "audio/")):
        return None
    return staff_served_of(attachment)


def staff_served_of(attachment: Attachment) -> tuple[str, int] | None:
    """The key and size of the file staff may play or download, or None.

    What `download` serves: the file is ready, or it was ready and a moderator took
    it down (they must see what they restore). Never a file still being processed or
    rejected by the pipeline, never a deleted one.
    """
    if attachment.lifecycle == Lifecycle.DELETED:
        return None
    taken_down = (
        attachment.status == Status.REJECTED
        and attachment.reason_code == ReasonCode.MODERATOR
        and attachment.ready_at is not None
    )
    if attachment.status != Status.READY and not taken_down:
        return None
    if not attachment.served_key or attachment.size is None:
        return None
    return attachment.served_key, attachment.size


def _staff_attachment(request: HttpRequest, object_id: str) -> Attachment | None:
    if not request.user.has_perm(VIEW_PERMISSION):
        raise PermissionDenied
    return scoped(Attachment.objects.all(), request.user).filter(pk=object_id).first()


def _staff_derivative(request: HttpRequest, object_id: str, kind: str) -> HttpResponseBase:
    attachment = _staff_attachment(request, object_id)
    derivative = staff_derivative_of(attachment, kind) if attachment is not None else None
    if attachment is None or derivative is None:
        raise Http404(f"no {kind}")
    return derivative_response(request, derivative, filename=f"{stem(attachment.filename, kind)}.webp")


def staff_thumbnail(request: HttpRequest, object_id: str) -> HttpResponseBase:
    """Stream the thumbnail derivative with the serving path's security headers."""
    return _staff_derivative(request, object_id, "thumbnail")


def staff_poster(request: HttpRequest, object_id: str) -> HttpResponseBase:
    """Stream a video's poster derivative, as the thumbnail."""
    return _staff_derivative(request, object_id, "poster")


def staff_media(request: HttpRequest, object_id: str) -> HttpResponseBase:
    """Stream a playable video or audio to the change page's player (Range requests: 206)."""
    attachment = _staff_attachment(request, object_id)
    served = staff_media_of(attachment) if attachment is not None else None
    if attachment is None or served is None:
        raise Http404("nothing to play")
    byte_range = request.headers.get("Range", "")
    if not byte_range or byte_range.replace(" ", "").startswith("bytes=0-"):
        # Who watched what: once per playback (its first request), not once per seek.
        log.info(
            "staff media playback",
            extra={"attachment_id": str(attachment.pk), "actor": staff_actor(request), "range": byte_range},
        )
    web = staff_web_of(attachment)
    if web is not None:  # plays in every browser, where the served copy (HEVC, 4K) may not
        return derivative_response(request, web, filename=f"{stem(attachment.filename, 'video')}.mp4")
    return served_response(request, attachment, served, inline=True)


def staff_web_of(attachment: Attachment) -> Derivative | None:
    """A video's web rendition once it is ready: what the console's player prefers."""
    state = renditions.web_state(attachment.metadata)
    if state is None or state.get("status") != renditions.READY:
        return None
    return staff_derivative_of(attachment, renditions.DERIVATIVE_KIND)


def staff_page(request: HttpRequest, object_id: str, number: int) -> HttpResponseBase:
    """A PDF's page `number` for the change page's first pages: made on first view in the sandbox, then stored."""
    attachment = _staff_attachment(request, object_id)
    if attachment is None or staff_served_of(attachment) is None:
        raise Http404("no page preview")
    try:
        page = page_preview_obtain(attachment=attachment, page=number)
    except NotFound:
        raise Http404("no such page") from None
    except Unavailable as exc:  # being made by another request, failed lately, or the sandbox is down
        return HttpResponse(exc.message, status=503, content_type="text/plain", headers=exc.headers)
    return derivative_response(request, page, filename=f"page-{number}.webp")


def staff_download(request: HttpRequest, object_id: str) -> HttpResponseBase:
    """Hand the served file to a staff member as a download; each one is audited with them as the actor."""
    attachment = _staff_attachment(request, object_id)
    served = staff_served_of(attachment) if attachment is not None else None
    if attachment is None or served is None:
        raise Http404("nothing to download")
    attachment_staff_download_record(attachment_id=attachment.pk, actor=staff_actor(request), size=served[1])
    return served_response(request, attachment, served, inline=False)
