"""The moderation console: read-only views of attachments; changes only through actions.

Actions (actions.py) need `attachments.moderate_attachment`, go through
an intermediate confirmation page, call the services and leave an audit trail.
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.exceptions import NotRegistered
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.defaultfilters import filesizeformat
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode

from ..errors import AirlockError
from ..links import admin as admin_links
from ..models import (
    ApiToken,
    Approval,
    Attachment,
    DeadLetter,
    Derivative,
    Lifecycle,
    Membership,
    RefHold,
    Status,
    Tenant,
    Tombstone,
    TransitionLog,
    ref_held_exists,
)
from ..reasons import ReasonCode
from ..retention.services.holds import ref_hold_clear, ref_hold_set
from ..selectors import is_held
from ..services.quotas import tenant_usage
from ..staff_scope import is_platform_staff, scoped
from ..variants import admin as admin_variants
from . import detail, media, previews, views
from .actions import (
    MODERATE_PERMISSION,
    MODERATION_ACTIONS,
    ModerationNoteForm,
    bulk_action,
    confirmation_page,
    error_text,
    note_form,
    perform_moderation,
    report,
    staff_actor,
)
from .finding import SavedQuestionFilter, search_query

TEXT_PREVIEW_CHARS = 2000

# The upload page (`/`) signs tenant users in through /admin/login/; the admin
# itself still admits staff only (AdminSite.has_permission checks is_staff on
# every admin page), so this only lets a non-staff user start a session.
admin.site.login_form = AuthenticationForm
admin.site.site_header = "Airlock moderation"
admin.site.site_title = "Airlock"
admin.site.index_title = "Moderation console"


# --- filters -----------------------------------------------------------------------


class ReadOnlyModelAdmin(admin.ModelAdmin):
    """Rows are changed by services (through actions), never by editing them in a form."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_moderate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(MODERATE_PERMISSION)


class CommittedFilter(admin.SimpleListFilter):
    title = "committed"
    parameter_name = "committed"

    def lookups(self, request, model_admin):
        return (("yes", "Yes"), ("no", "No"))

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(lifecycle=Lifecycle.COMMITTED)
        if self.value() == "no":
            return queryset.exclude(lifecycle=Lifecycle.COMMITTED)
        return queryset


class ReasonCodeFilter(admin.SimpleListFilter):
    title = "reason code"
    parameter_name = "reason_code"

    def lookups(self, request, model_admin):
        # The contract's codes (docs/api.md), not a DISTINCT over the whole table on every page view.
        return [(code, code) for code in ReasonCode.values]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(reason_code=self.value())
        return queryset


class StorageFilter(admin.SimpleListFilter):
    """Files reconcile found without their original in storage (failed/object_missing)."""

    title = "storage"
    parameter_name = "storage"

    def lookups(self, request, model_admin):
        return (("object_missing", "Object missing (found by reconcile)"),)

    def queryset(self, request, queryset):
        if self.value() == "object_missing":
            return queryset.filter(status=Status.FAILED, reason_code=ReasonCode.OBJECT_MISSING)
        return queryset


class ProfileFilter(admin.SimpleListFilter):
    title = "profile"
    parameter_name = "profile"

    def lookups(self, request, model_admin):
        from ..profiles import all_profiles

        return [(name, name) for name in all_profiles()]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(profile=self.value())
        return queryset


# --- read-only inlines ---------------------------------------------------------------


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class DeadLetterInline(ReadOnlyInline):
    model = DeadLetter
    verbose_name_plural = "dead letters"
    fields = ("link", "kind", "created_at", "short_error", "resolved_at", "resolved_by")
    readonly_fields = fields

    @admin.display(description="dead letter")
    def link(self, obj: DeadLetter) -> str:
        url = reverse("admin:attachments_deadletter_change", args=[obj.pk])
        return format_html('<a href="{}">#{}</a>', url, obj.pk)

    @admin.display(description="last error")
    def short_error(self, obj: DeadLetter) -> str:
        return obj.last_error[:300]


class DerivativeInline(ReadOnlyInline):
    model = Derivative
    fields = ("kind", "content_type", "size", "width", "height", "created_at")
    readonly_fields = fields

    def get_queryset(self, request):
        # Named variants have a box of their own (attachments/variants/admin.py), with their purge.
        return super().get_queryset(request).exclude(kind__startswith="variant:")


# --- attachments ---------------------------------------------------------------------


def _is_uuid(value: object) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


# The approval in the list's status cell and on the change page (not_required says nothing in the list).
_APPROVAL_NOTES: dict[str, str] = {Approval.PENDING: "awaiting approval", Approval.DECLINED: "declined"}
_APPROVAL_WORDS: dict[str, str] = {
    Approval.PENDING: "waiting for the host's approval: served to nobody but its guest until approved",
    Approval.APPROVED: "approved",
    Approval.DECLINED: "declined: discarded, the sweeper removes it",
}


@admin.register(Attachment)
class AttachmentAdmin(ReadOnlyModelAdmin):
    # Eight columns fit beside both sidebars at 1280 px: status carries its reason, owner its tenant;
    # lifecycle and committed are filters, not columns.
    list_display = ("small_preview", "filename", "status_reason", "owner_tenant", "ref", "size_human", "created")
    list_display_links = ("filename",)
    # Only tenants among the rows this staff member may see (a tenant moderator sees one name).
    list_filter = (
        SavedQuestionFilter,
        "status",
        ProfileFilter,
        ("tenant", admin.RelatedOnlyFieldListFilter),
        "lifecycle",
        "approval",
        ReasonCodeFilter,
        CommittedFilter,
        StorageFilter,
        ("created_at", admin.DateFieldListFilter),
        ("ready_at", admin.DateFieldListFilter),
    )
    search_fields = ("filename",)  # get_search_results builds the whole query (finding.search_query)
    search_help_text = (
        "Search by ref (ref:wedding:smith for refs starting so; a plain term matches ref "
        "prefixes too), subject (subject:user-42, exactly), owner username, tenant slug, filename, id or sha256."
    )
    list_select_related = ("owner", "tenant")
    ordering = ("-created_at",)
    date_hierarchy = None
    show_full_result_count = False
    list_per_page = 50
    # The transition history is the "timeline" field (detail.timeline): the last events, "show all" below.
    inlines = (DeadLetterInline, DerivativeInline)
    actions = [bulk_action(name) for name in MODERATION_ACTIONS]
    change_form_template = "admin/attachments/attachment/change_form.html"
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "id",
                    "filename",
                    "preview",
                    "owner",
                    "subject",
                    "tenant",
                    "profile",
                    "status",
                    "reason",
                    "lifecycle",
                    "approval_state",
                    "same_ref",
                    "held",
                    "hold_detail",
                )
            },
        ),
        ("Timeline", {"fields": ("timeline",)}),
        (
            "Bytes",
            {
                "fields": (
                    "size",
                    "content_type",
                    "sha256",
                    "declared_size",
                    "declared_type",
                    "storage_key",
                    "served_key",
                    "quarantine_key",
                )
            },
        ),
        ("Metadata", {"fields": ("metadata_pretty", "extracted_text")}),
        ("Processing", {"fields": ("attempts", "step", "lease_expires_at", "uploaded_at", "ready_at")}),
        (
            "Lifecycle",
            {
                "fields": (
                    "created_at",
                    "updated_at",
                    "expires_at",
                    "committed_at",
                    "discarded_at",
                    "deleted_at",
                    "delete_attempts",
                    "delete_error",
                )
            },
        ),
    )
    # Shown only for video and audio (get_fieldsets).
    media_fieldset = ("Media", {"fields": ("media_facts",)})
    readonly_fields = (*(cast(str, f) for _, opts in fieldsets for f in opts["fields"]), "media_facts")

    def get_queryset(self, request):
        queryset = scoped(super().get_queryset(request), request.user)
        # One EXISTS per preview kind in the list query, not one query per row.
        return queryset.annotate(
            has_thumbnail=Exists(Derivative.objects.filter(attachment=OuterRef("pk"), kind="thumbnail")),
            has_poster=Exists(Derivative.objects.filter(attachment=OuterRef("pk"), kind="poster")),
            ref_held=ref_held_exists(),
        )

    def get_actions(self, request):
        actions = super().get_actions(request)
        for name, action in MODERATION_ACTIONS.items():
            if not action.allowed(request):
                actions.pop(f"moderate_{name}", None)
        return actions

    @admin.display(description="legal hold", boolean=True)
    def held(self, obj: Attachment) -> bool:
        return is_held(obj)

    @admin.display(description="hold")
    def hold_detail(self, obj: Attachment) -> str:
        parts = []
        if obj.legal_hold:
            entry = obj.transitions.filter(transition="legal_hold").order_by("-created_at", "-id").first()
            parts.append(
                f"file held by {entry.actor} on {entry.created_at:%Y-%m-%d %H:%M}: {entry.message}"
                if entry
                else "file held"
            )
        if obj.ref:
            hold = RefHold.objects.filter(tenant_id=obj.tenant_id, ref=obj.ref, cleared_at__isnull=True).first()
            if hold is not None:
                parts.append(
                    f"ref {hold.ref} held by {hold.created_by} on {hold.created_at:%Y-%m-%d %H:%M}: {hold.reason}"
                )
        return "; ".join(parts) or "—"

    def get_search_results(self, request, queryset, search_term):
        query = search_query(search_term)
        if query is None:
            return queryset, False
        return queryset.filter(query), False  # owner and tenant are to-one: no duplicates

    @admin.display(description="preview")
    def small_preview(self, obj: Attachment) -> str:
        # The staff preview endpoints gate again (scope, deleted files); this only spares a broken image.
        if obj.lifecycle == Lifecycle.DELETED:
            return ""
        kind = (
            "thumbnail"
            if getattr(obj, "has_thumbnail", False)
            else ("poster" if getattr(obj, "has_poster", False) else None)
        )
        if kind is None:
            return ""
        url = reverse(f"admin:attachments_attachment_{kind}", args=[obj.pk])
        return format_html(
            '<img class="airlock-list-thumb" src="{}" alt="{}" loading="lazy" width="48" height="48">', url, kind
        )

    @admin.display(description="status", ordering="status")
    def status_reason(self, obj: Attachment) -> str:
        # A legal hold and an approval ride in the status cell: a column of their own no longer fits at 1280 px.
        notes = [
            note
            for note in (obj.reason_code, "legal hold" if is_held(obj) else "", _APPROVAL_NOTES.get(obj.approval, ""))
            if note
        ]
        if not notes:
            return obj.get_status_display()
        return format_html('{}<br><span class="airlock-quiet">{}</span>', obj.get_status_display(), " · ".join(notes))

    @admin.display(description="owner", ordering="owner__username")
    def owner_tenant(self, obj: Attachment) -> str:
        # The subject under its owner when a host's token made the file for one of its people.
        if obj.subject and obj.subject != obj.owner.get_username():
            return format_html(
                '{}<br><span class="airlock-subject" title="subject">for {}</span>'
                '<br><span class="airlock-quiet">{}</span>',
                obj.owner,
                obj.subject,
                obj.tenant.slug,
            )
        return format_html('{}<br><span class="airlock-quiet">{}</span>', obj.owner, obj.tenant.slug)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Attachment) -> str:
        # Date over time, in the admin's time zone: a third the width of "Dec. 4, 2026, 2:45 p.m.".
        at = timezone.localtime(obj.created_at)
        return format_html(
            '<time datetime="{}">{}<br>{}</time>', at.isoformat(), at.strftime("%Y-%m-%d"), at.strftime("%H:%M")
        )

    @admin.display(description="size", ordering="size")
    def size_human(self, obj: Attachment) -> str:
        size = obj.size if obj.size is not None else obj.declared_size
        return filesizeformat(size) if size is not None else "—"

    @admin.display(description="approval")
    def approval_state(self, obj: Attachment) -> str:
        if obj.approval == Approval.NOT_REQUIRED:
            return "not required"
        words = _APPROVAL_WORDS.get(obj.approval, obj.approval)
        if obj.approval != Approval.PENDING or obj.upload_link_id is None:
            return words
        url = admin_links.queue_url(link_id=obj.upload_link_id)
        return format_html(
            '{} <a class="airlock-approval-queue" href="{}">open its link\'s approval queue</a>', words, url
        )

    @admin.display(description="ref")
    def same_ref(self, obj: Attachment) -> str:
        if not obj.ref:
            return "—"
        # A ref is its tenant's: another tenant's ref of the same name is another ref.
        query = urlencode({"ref__exact": obj.ref, "tenant__id__exact": str(obj.tenant_id)})
        url = reverse("admin:attachments_attachment_changelist") + "?" + query
        return format_html('{} <a class="airlock-same-ref" href="{}">files with the same ref</a>', obj.ref, url)

    @admin.display(description="reason")
    def reason(self, obj: Attachment) -> str:
        if not obj.reason_code:
            return "—"
        return format_html("<strong>{}</strong> — {}", obj.reason_code, obj.reason_message)

    def get_fieldsets(self, request, obj=None):
        fieldsets = list(super().get_fieldsets(request, obj))
        if obj is not None and media.is_media(obj.metadata):
            fieldsets.insert(1, self.media_fieldset)
        return fieldsets

    @admin.display(description="preview")
    def preview(self, obj: Attachment) -> str:
        if views.staff_media_of(obj) is not None:
            poster = views.staff_derivative_of(obj, "poster")
            return media.player_html(
                content_type=obj.content_type,
                src=reverse("admin:attachments_attachment_media", args=[obj.pk]),
                poster=reverse("admin:attachments_attachment_poster", args=[obj.pk]) if poster else None,
            )
        thumbnail = views.staff_thumbnail_of(obj)
        if thumbnail is None:
            return "no thumbnail (only a sandbox-rendered thumbnail is ever shown here)"
        url = reverse("admin:attachments_attachment_thumbnail", args=[obj.pk])
        return admin_variants.preview_img(obj, thumbnail, url)

    @admin.display(description="facts")
    def metadata_pretty(self, obj: Attachment) -> str:
        return detail.facts_table(obj.metadata)

    @admin.display(description="transition history")
    def timeline(self, obj: Attachment) -> str:
        return detail.timeline(obj)

    @admin.display(description="probed")
    def media_facts(self, obj: Attachment) -> str:
        return media.media_facts_html(obj.metadata or {})

    @admin.display(description="extracted text")
    def extracted_text(self, obj: Attachment) -> str:
        if not obj.text:
            return "—"
        shown = obj.text[:TEXT_PREVIEW_CHARS]
        more = len(obj.text) - len(shown)
        suffix = f"\n… ({more} more characters)" if more > 0 else ""
        return detail.preformatted(shown + suffix)

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        extra = [
            path(
                "<uuid:object_id>/thumbnail/",
                self.admin_site.admin_view(views.staff_thumbnail),
                name="%s_%s_thumbnail" % info,
            ),
            path(
                "<uuid:object_id>/poster/", self.admin_site.admin_view(views.staff_poster), name="%s_%s_poster" % info
            ),
            path("<uuid:object_id>/media/", self.admin_site.admin_view(views.staff_media), name="%s_%s_media" % info),
            path(
                "<uuid:object_id>/download/",
                self.admin_site.admin_view(views.staff_download),
                name="%s_%s_download" % info,
            ),
            path(
                "<uuid:object_id>/page/<int:number>/",
                self.admin_site.admin_view(views.staff_page),
                name="%s_%s_page" % info,
            ),
            path(
                "<uuid:object_id>/variant/<slug:name>/",
                self.admin_site.admin_view(admin_variants.staff_variant),
                name="%s_%s_variant" % info,
            ),
            path(
                "approval/",
                self.admin_site.admin_view(partial(admin_links.approval_queue, self)),
                name="%s_%s_approval" % info,
            ),
            path(
                "<uuid:object_id>/moderate/<slug:action_name>/",
                self.admin_site.admin_view(self.moderate_view),
                name="%s_%s_moderate" % info,
            ),
        ]
        return extra + super().get_urls()

    def moderate_view(self, request: HttpRequest, object_id: uuid.UUID, action_name: str) -> HttpResponse:
        """One action on one attachment, from its detail page: confirm (GET), then do (POST)."""
        action = MODERATION_ACTIONS.get(action_name)
        if action is None or not self.has_moderate_permission(request) or not action.allowed(request):
            raise PermissionDenied
        attachment = self.get_queryset(request).select_related("owner", "tenant").filter(pk=object_id).first()
        if attachment is None:
            # A private ModelAdmin helper (not in django-stubs): the admin's own "no such object" redirect.
            return self._get_obj_does_not_exist_redirect(  # type: ignore[attr-defined]
                request, self.opts, str(object_id)
            )
        form = ModerationNoteForm() if action.needs_note else None
        if request.method == "POST":
            form, valid, note = note_form(request, action)
            if valid:
                done, problems = perform_moderation(self, request, action, [attachment], note)
                report(self, request, action.label, done, problems)
                return HttpResponseRedirect(reverse("admin:attachments_attachment_change", args=[attachment.pk]))
        return confirmation_page(self, request, action=action, objects=[attachment], form=form, bulk=False)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        attachment = self.get_queryset(request).filter(pk=object_id).first() if _is_uuid(object_id) else None
        extra_context = {
            **(extra_context or {}),
            "airlock_summary": detail.status_summary(attachment) if attachment is not None else "",
            "can_download": attachment is not None and views.staff_served_of(attachment) is not None,
            # console_previews.html: a PDF's first pages, an archive's recorded listing.
            "airlock_pages": previews.page_urls(attachment) if attachment is not None else [],
            "airlock_page_count": (attachment.metadata or {}).get("page_count") if attachment is not None else None,
            "airlock_archive": previews.archive_listing(attachment.metadata) if attachment is not None else None,
            "can_moderate": self.has_moderate_permission(request),
            "moderation_actions": [
                a
                for a in MODERATION_ACTIONS.values()
                if attachment is not None and a.allowed(request) and a.offered(attachment)
            ],
            **admin_variants.change_context(attachment),
        }
        return super().change_view(request, object_id, form_url, extra_context)


# --- audit and tenancy ---------------------------------------------------------------


@admin.register(TransitionLog)
class TransitionLogAdmin(ReadOnlyModelAdmin):
    list_display = (
        "created_at",
        "attachment_id",
        "transition",
        "from_status",
        "to_status",
        "actor",
        "reason_code",
        "message",
    )
    list_filter = ("transition", "to_status", "reason_code")
    search_fields = ("actor", "message")
    ordering = ("-created_at", "-id")
    show_full_result_count = False

    def get_queryset(self, request):
        return scoped(super().get_queryset(request), request.user, tenant_path="attachment__tenant")


@admin.register(Tombstone)
class TombstoneAdmin(ReadOnlyModelAdmin):
    """What stays of hard-deleted attachments (AIRLOCK_RETENTION_DAYS.tombstones): search by attachment id."""

    list_display = (
        "purged_at",
        "attachment_id",
        "tenant_slug",
        "subject",
        "status",
        "reason_code",
        "lifecycle",
        "sha256",
        "created_at",
        "deleted_at",
    )
    list_filter = ("status", "reason_code")
    search_fields = ("=attachment_id", "=sha256", "=subject", "storage_key")
    ordering = ("-purged_at", "-id")
    show_full_result_count = False

    def get_queryset(self, request):
        return scoped(super().get_queryset(request), request.user)


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    """Tenants with what each holds against its quotas; the quota fields override the global settings."""

    list_display = ("slug", "name", "bytes_usage", "files_usage", "created_at")
    list_select_related = ("usage",)
    search_fields = ("slug", "name")
    fields = ("slug", "name", "quota_bytes", "quota_files", "bytes_usage", "files_usage")
    readonly_fields = ("bytes_usage", "files_usage")

    @admin.display(description="bytes used / quota")
    def bytes_usage(self, tenant: Tenant) -> str:
        if tenant.pk is None:
            return "—"
        usage = tenant_usage(tenant=tenant)
        limit = filesizeformat(usage.bytes_limit) if usage.bytes_limit is not None else ""
        return _used_of(filesizeformat(usage.bytes_used), usage.bytes_used, usage.bytes_limit, limit)

    @admin.display(description="files used / quota")
    def files_usage(self, tenant: Tenant) -> str:
        if tenant.pk is None:
            return "—"
        usage = tenant_usage(tenant=tenant)
        limit = f"{usage.files_limit:,}" if usage.files_limit is not None else ""
        return _used_of(f"{usage.files_used:,}", usage.files_used, usage.files_limit, limit)


def _used_of(used_text: str, used: int, limit: int | None, limit_text: str) -> str:
    if limit is None:
        return f"{used_text} (unlimited)"
    share = f"{100 * used / limit:.0f} %" if limit else "full"
    return f"{used_text} of {limit_text} ({share})"


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "tenant")
    list_select_related = ("user", "tenant")
    search_fields = ("user__username", "tenant__slug")
    autocomplete_fields = ()


# --- API tokens ------------------------------------------------------------------------

# DRF's own token admin would create plain-text tokens nothing accepts any more.
try:
    from rest_framework.authtoken.models import TokenProxy

    admin.site.unregister(TokenProxy)
except NotRegistered:
    pass


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are listed by prefix (the key itself is never stored) and revoked by deleting them."""

    list_display = ("prefix", "user", "created_at")
    list_select_related = ("user",)
    search_fields = ("user__username", "prefix")
    fields = ("prefix", "user", "created_at")
    readonly_fields = fields

    def has_add_permission(self, request):
        return False  # `manage.py createuser` (or the tokens service) issues keys and shows them once

    def has_change_permission(self, request, obj=None):
        return False


# --- legal holds on refs ------------------------------------------------------------------


class RefHoldForm(forms.ModelForm):
    tenant_slug = forms.SlugField(label="tenant")

    class Meta:
        model = RefHold
        fields = ("ref", "reason")


@admin.register(RefHold)
class RefHoldAdmin(admin.ModelAdmin):
    """Holds on every file of a ref: placed and cleared by platform staff only, through the holds service.

    Being platform staff is the permission (as for the file holds): no per-model grant
    lets a tenant-scoped moderator in, and no platform staff member needs one.
    """

    list_display = ("tenant", "ref", "reason", "created_by", "created_at", "cleared_by", "cleared_at")
    list_filter = (("cleared_at", admin.EmptyFieldListFilter),)
    list_select_related = ("tenant",)
    search_fields = ("ref", "tenant__slug", "reason")
    ordering = ("-created_at",)
    actions = ["clear_holds"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            return RefHoldForm
        return super().get_form(request, obj, change, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        return (
            () if obj is None else ("tenant", "ref", "reason", "created_by", "created_at", "cleared_by", "cleared_at")
        )

    def has_module_permission(self, request):
        return is_platform_staff(request.user)

    def has_view_permission(self, request, obj=None):
        return is_platform_staff(request.user)

    def has_change_permission(self, request, obj=None):
        return is_platform_staff(request.user)  # clearing; the fields stay read-only

    def has_add_permission(self, request):
        return is_platform_staff(request.user)

    def has_delete_permission(self, request, obj=None):
        return False  # a hold is cleared (and the record kept), never deleted

    def save_model(self, request, obj, form, change):
        if change:
            return
        try:
            hold = ref_hold_set(
                tenant=form.cleaned_data["tenant_slug"], ref=obj.ref, reason=obj.reason, actor=staff_actor(request)
            )
        except AirlockError as exc:
            raise PermissionDenied(error_text(exc)) from exc
        obj.pk = hold.pk

    @admin.action(description="Clear the selected holds", permissions=["change"])
    def clear_holds(self, request: HttpRequest, queryset):
        cleared = sum(
            ref_hold_clear(tenant=h.tenant.slug, ref=h.ref, actor=staff_actor(request))
            for h in queryset.filter(cleared_at__isnull=True).select_related("tenant")
        )
        self.message_user(request, f"Cleared {cleared} hold(s).", messages.SUCCESS)
