"""Named variants on the attachment's change page: which exist, purging them, and `srcset` for the preview.

The box is its own include (templates/admin/attachments/attachment/variants.html),
fed by `change_context`; purging is the `purge_variants` moderation action
(services/purge.py: rows dropped, objects deleted after commit under the
sweeper's brakes, audited on the file's timeline). The preview's `srcset` offers
the thumbnail and every variant wider than it through `staff_variant`, which makes
a missing one on first request like the API (only for a file that is served now).
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.html import format_html

from ..admin.views import _staff_attachment
from ..errors import AirlockError
from ..models import Attachment, Derivative
from ..selectors import servable_now
from ..serving import derivative_response, stem
from .services.obtain import variant_obtain
from .services.purge import VARIANT_KIND_PREFIX
from .spec import FORMATS, negotiated_format, variant_sizes, variant_widths


def existing_variants(attachment: Attachment) -> list[dict[str, Any]]:
    """The variants stored for this file: name, format, size, dimensions, when made."""
    rows = Derivative.objects.filter(attachment=attachment, kind__startswith=VARIANT_KIND_PREFIX).order_by(
        "created_at", "kind"
    )
    made = []
    for row in rows:
        _, name, fmt = row.kind.split(":", 2)
        made.append(
            {
                "name": name,
                "format": fmt,
                "size": row.size,
                "width": row.width,
                "height": row.height,
                "created_at": row.created_at,
            }
        )
    return made


def change_context(attachment: Attachment | None) -> dict[str, Any]:
    """What the change page's variants box shows (nothing for a profile without variants)."""
    if attachment is None or not variant_sizes(attachment.profile, attachment.content_type):
        return {"variants_box": False}
    made = existing_variants(attachment)
    return {
        "variants_box": True,
        "variants": made,
        "variants_bytes": sum(v["size"] for v in made),
        "variant_sizes": sorted(
            variant_sizes(attachment.profile, attachment.content_type).items(), key=lambda item: item[1]
        ),
    }


def preview_srcset(attachment: Attachment, thumbnail: Derivative) -> str:
    """`srcset` over the thumbnail and the variants wider than it, or "" when the file has none to offer."""
    if not servable_now(attachment) or not thumbnail.width:
        return ""
    thumb_url = reverse("admin:attachments_attachment_thumbnail", args=[attachment.pk])
    candidates = [f"{thumb_url} {thumbnail.width}w"] + [
        f"{reverse('admin:attachments_attachment_variant', args=[attachment.pk, name])} {width}w"
        for name, width in variant_widths(attachment.profile, attachment.content_type, attachment.metadata).items()
        if width > thumbnail.width
    ]
    return ", ".join(candidates) if len(candidates) > 1 else ""


def preview_img(attachment: Attachment, thumbnail: Derivative, url: str) -> str:
    srcset = preview_srcset(attachment, thumbnail)
    if not srcset:
        return format_html(
            '<img class="airlock-thumb" src="{}" alt="thumbnail" width="{}" height="{}">',
            url,
            thumbnail.width or "",
            thumbnail.height or "",
        )
    # Shown at the thumbnail's size: a high-density screen takes a variant instead of blurring it.
    return format_html(
        '<img class="airlock-thumb" src="{}" srcset="{}" sizes="{}px" alt="thumbnail" width="{}" height="{}">',
        url,
        srcset,
        thumbnail.width,
        thumbnail.width,
        thumbnail.height or "",
    )


def staff_variant(request: HttpRequest, object_id: str, name: str) -> HttpResponseBase:
    """A named variant for the staff preview's `srcset`: the API's gate (served now), made on first request."""
    attachment = _staff_attachment(request, object_id)
    if (
        attachment is None
        or not servable_now(attachment)
        or name not in variant_sizes(attachment.profile, attachment.content_type)
    ):
        raise Http404("no such variant")
    fmt = negotiated_format(request.headers.get("Accept", ""))
    try:
        variant = variant_obtain(attachment=attachment, name=name, fmt=fmt)
    except AirlockError as exc:  # not served any more, or being made / failed: the browser keeps the thumbnail
        refused = HttpResponse(exc.message, status=exc.status, content_type="text/plain")
        for header, value in exc.headers.items():
            refused[header] = value
        return refused
    filename = f"{stem(attachment.filename, 'variant')}-{name}.{FORMATS[fmt][1]}"
    response = derivative_response(request, variant, filename=filename)
    patch_vary_headers(response, ["Accept"])  # the format follows Accept
    return response
