"""Upload links in the console: each with how many of its guests' files wait for approval, and its queue.

Read-only here: links are made, and disabled, through the API by the host's service
account. Staff who may see a tenant's attachments may see its links.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from ..models import UploadLink
from ..staff_scope import scoped
from . import approval

VIEW_PERMISSION = "attachments.view_attachment"


@admin.register(UploadLink)
class UploadLinkAdmin(admin.ModelAdmin):
    list_display = ("title_or_ref", "ref", "tenant", "waiting_queue", "state", "expires_at")
    list_filter = ("requires_approval", ("tenant", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("tenant", "user")
    search_fields = ("ref", "title")
    ordering = ("-created_at",)
    show_full_result_count = False
    fields = (
        "id",
        "title",
        "ref",
        "tenant",
        "user",
        "profiles",
        "guest_page",
        "requires_approval",
        "waiting_queue",
        "max_files_per_guest",
        "max_bytes_per_guest",
        "max_files",
        "files_used",
        "created_at",
        "expires_at",
        "disabled_at",
    )
    readonly_fields = fields

    def get_queryset(self, request):
        return approval.with_waiting_count(scoped(super().get_queryset(request), request.user))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(VIEW_PERMISSION)

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return request.user.has_perm(VIEW_PERMISSION)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="link", ordering="title")
    def title_or_ref(self, link: UploadLink) -> str:
        return link.title or "(untitled)"

    @admin.display(description="waiting for approval", ordering="waiting")
    def waiting_queue(self, link: UploadLink) -> str:
        waiting = getattr(link, "waiting", 0)
        if not link.requires_approval and not waiting:
            return "—"
        return format_html(
            '<a class="airlock-link-queue" href="{}" data-waiting="{}">{} waiting</a>',
            approval.queue_url(link=link),
            waiting,
            waiting,
        )

    @admin.display(description="guests' page")
    def guest_page(self, link: UploadLink) -> str:
        # What the printed QR code opens; the code itself is the guest page's own (made by segno, not fetched).
        page = reverse("guest-page", kwargs={"link_id": link.pk})
        qr = reverse("guest-qr-svg", kwargs={"link_id": link.pk})
        return format_html(
            '<a class="airlock-guest-page" href="{}">{}</a><br>'
            '<img class="airlock-qr" src="{}" alt="QR code of the guests\' page" width="160" height="160">',
            page,
            page,
            qr,
        )

    @admin.display(description="state")
    def state(self, link: UploadLink) -> str:
        if link.disabled_at is not None:
            return "disabled"
        return "expired" if link.expires_at <= timezone.now() else "open"
