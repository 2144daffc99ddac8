"""The moderation console: read-only views of attachments; changes only through actions.

Actions (admin/actions.py) need `attachments.moderate_attachment`, go through
an intermediate confirmation page, call the services and leave an audit trail.
"""

from __future__ import annotations

import json
import uuid

from django.contrib import admin, messages
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.defaultfilters import filesizeformat
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from . import views
from .actions import (
    MODERATE_PERMISSION,
    MODERATION_ACTIONS,
    ModerationAction,
    ModerationNoteForm,
    bulk_action,
    confirmation_page,
    error_text,
    note_form,
    perform_moderation,
    report,
    staff_actor,
)
from ..errors import AirlockError
from ..models import ApiToken, Attachment, DeadLetter, Derivative, Lifecycle, Membership, Tenant, TransitionLog
from ..services.moderation import attachment_requeue, dead_letter_resolve
from ..services.quotas import tenant_usage
from ..services.transitions import TransitionConflict
from ..staff_scope import scoped
from sweeper.dead_letters import (  # noqa: E402 - the sweep's dead letters are handled by its services
    DeadLetterRefused,
    sweep_dead_letter_abandon,
    sweep_dead_letter_resolve,
    sweep_dead_letter_retry,
)

TEXT_PREVIEW_CHARS = 2000
REASON_CODES = (
    "too_large", "type_not_allowed", "malware", "pixel_limit", "page_limit", "archive_limit",
    "duration_limit", "corrupt", "timeout", "object_missing", "moderator", "infrastructure",
)

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
        # The contract's codes (API.md), not a DISTINCT over the whole table on every page view.
        return [(code, code) for code in REASON_CODES]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(reason_code=self.value())
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


class TransitionLogInline(ReadOnlyInline):
    model = TransitionLog
    verbose_name = "transition"
    verbose_name_plural = "transition history"
    fields = ("created_at", "transition", "from_status", "to_status", "actor", "reason_code", "message")
    readonly_fields = fields
    ordering = ("created_at", "id")


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


# --- attachments ---------------------------------------------------------------------

def _is_uuid(value: object) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


def _pre(text: str) -> str:
    return format_html('<pre class="airlock-pre">{}</pre>', text)


@admin.register(Attachment)
class AttachmentAdmin(ReadOnlyModelAdmin):
    list_display = ("filename", "status", "reason_code", "profile", "tenant", "owner", "lifecycle",
                    "is_committed", "created_at")
    list_display_links = ("filename",)
    # Only tenants among the rows this staff member may see (a tenant moderator sees one name).
    list_filter = ("status", ProfileFilter, ("tenant", admin.RelatedOnlyFieldListFilter), "lifecycle",
                   ReasonCodeFilter, CommittedFilter)
    search_fields = ("filename", "owner__username", "=sha256")
    search_help_text = "Search by id, filename, owner username or sha256."
    list_select_related = ("owner", "tenant")
    ordering = ("-created_at",)
    date_hierarchy = None
    show_full_result_count = False
    list_per_page = 50
    inlines = (TransitionLogInline, DeadLetterInline, DerivativeInline)
    actions = [bulk_action(name) for name in MODERATION_ACTIONS]
    change_form_template = "admin/attachments/attachment/change_form.html"
    fieldsets = (
        (None, {"fields": ("id", "filename", "preview", "owner", "tenant", "profile", "status", "reason",
                           "lifecycle", "ref")}),
        ("Bytes", {"fields": ("size", "content_type", "sha256", "declared_size", "declared_type",
                              "storage_key", "served_key", "quarantine_key")}),
        ("Metadata", {"fields": ("metadata_pretty", "extracted_text")}),
        ("Processing", {"fields": ("attempts", "step", "lease_expires_at", "uploaded_at", "ready_at")}),
        ("Lifecycle", {"fields": ("created_at", "updated_at", "expires_at", "committed_at", "discarded_at",
                                  "deleted_at", "delete_attempts", "delete_error")}),
    )
    readonly_fields = tuple(f for _, opts in fieldsets for f in opts["fields"])

    def get_queryset(self, request):
        return scoped(super().get_queryset(request), request.user)

    def get_search_results(self, request, queryset, search_term):
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        try:
            pk = uuid.UUID(search_term.strip())
        except ValueError:
            return results, may_have_duplicates
        return results | queryset.filter(pk=pk), may_have_duplicates

    @admin.display(description="committed", boolean=True)
    def is_committed(self, obj: Attachment) -> bool:
        return obj.lifecycle == Lifecycle.COMMITTED

    @admin.display(description="reason")
    def reason(self, obj: Attachment) -> str:
        if not obj.reason_code:
            return "—"
        return format_html("<strong>{}</strong> — {}", obj.reason_code, obj.reason_message)

    @admin.display(description="preview")
    def preview(self, obj: Attachment) -> str:
        thumbnail = views.staff_thumbnail_of(obj)
        if thumbnail is None:
            return "no thumbnail (only a sandbox-rendered thumbnail is ever shown here)"
        url = reverse("admin:attachments_attachment_thumbnail", args=[obj.pk])
        return format_html('<img class="airlock-thumb" src="{}" alt="thumbnail" width="{}" height="{}">',
                           url, thumbnail.width or "", thumbnail.height or "")

    @admin.display(description="metadata")
    def metadata_pretty(self, obj: Attachment) -> str:
        if not obj.metadata:
            return "—"
        return _pre(json.dumps(obj.metadata, indent=2, sort_keys=True, ensure_ascii=False, default=str))

    @admin.display(description="extracted text")
    def extracted_text(self, obj: Attachment) -> str:
        if not obj.text:
            return "—"
        shown = obj.text[:TEXT_PREVIEW_CHARS]
        more = len(obj.text) - len(shown)
        suffix = f"\n… ({more} more characters)" if more > 0 else ""
        return _pre(shown + suffix)

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        extra = [
            path("<uuid:object_id>/thumbnail/", self.admin_site.admin_view(views.staff_thumbnail),
                 name="%s_%s_thumbnail" % info),
            path("<uuid:object_id>/moderate/<slug:action_name>/", self.admin_site.admin_view(self.moderate_view),
                 name="%s_%s_moderate" % info),
        ]
        return extra + super().get_urls()

    def moderate_view(self, request: HttpRequest, object_id: uuid.UUID, action_name: str) -> HttpResponse:
        """One action on one attachment, from its detail page: confirm (GET), then do (POST)."""
        action = MODERATION_ACTIONS.get(action_name)
        if action is None or not self.has_moderate_permission(request):
            raise PermissionDenied
        attachment = self.get_queryset(request).select_related("owner", "tenant").filter(pk=object_id).first()
        if attachment is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, str(object_id))
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
            "can_moderate": self.has_moderate_permission(request),
            "moderation_actions": [a for a in MODERATION_ACTIONS.values()
                                   if attachment is not None and a.offered(attachment)],
        }
        return super().change_view(request, object_id, form_url, extra_context)


# --- dead letters --------------------------------------------------------------------

class OpenFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return (("open", "Waiting"), ("resolved", "Resolved"))

    def queryset(self, request, queryset):
        if self.value() == "open":
            return queryset.filter(resolved_at__isnull=True)
        if self.value() == "resolved":
            return queryset.filter(resolved_at__isnull=False)
        return queryset


def _requeue(letter: DeadLetter, actor: str, note: str) -> None:
    if letter.attachment_id is None:
        raise ValueError("no attachment to requeue (resolve it instead)")
    if letter.kind == DeadLetter.Kind.SWEEP:
        raise ValueError("a sweep dead letter is about deleting objects: retry the delete instead")
    attachment_requeue(attachment_id=letter.attachment_id, actor=actor)
    # The service resolves open dead letters of a requeued attachment; make sure this one is too.
    dead_letter_resolve(dead_letter_id=letter.pk, actor=actor)


def _retry_delete(letter: DeadLetter, actor: str, note: str) -> None:
    result = sweep_dead_letter_retry(dead_letter_id=letter.pk, actor=actor)
    if not result.resolved:
        failed = "; ".join(f"{k}: {e}" for k, e in list(result.failed.items())[:3])
        raise DeadLetterRefused(result.reason + (f" ({failed})" if failed else ""))


def _abandon(letter: DeadLetter, actor: str, note: str) -> None:
    sweep_dead_letter_abandon(dead_letter_id=letter.pk, actor=actor, reason=note)


def _resolve(letter: DeadLetter, actor: str, note: str) -> None:
    if letter.kind == DeadLetter.Kind.SWEEP:
        sweep_dead_letter_resolve(dead_letter_id=letter.pk, actor=actor)
    else:
        dead_letter_resolve(dead_letter_id=letter.pk, actor=actor)


DEAD_LETTER_REQUEUE = ModerationAction(
    "requeue", "Requeue",
    "The failed attachment of each dead letter goes back to pending with fresh attempts and is enqueued "
    "again; the dead letter is resolved. Dead letters without an attachment cannot be requeued here.",
    _requeue,
)
DEAD_LETTER_RESOLVE = ModerationAction(
    "resolve", "Resolve",
    "The dead letters are marked resolved (by you, now); nothing is retried. A sweep dead letter is "
    "resolved only once storage confirms its objects are gone (or they were abandoned).",
    _resolve,
)
DEAD_LETTER_RETRY_DELETE = ModerationAction(
    "retry_delete", "Retry the delete",
    "The objects of each sweep dead letter are deleted now (unless a sweeper brake is on). When every "
    "one is gone the row is marked deleted and the letter resolved; otherwise you are told which failed.",
    _retry_delete, dangerous=True,
)
DEAD_LETTER_ABANDON = ModerationAction(
    "abandon", "Abandon the objects",
    "Give up deleting the objects of each sweep dead letter: the row is marked deleted and the letter "
    "resolved, with your reason in the audit trail. Reconcile keeps trying the leftovers.",
    _abandon, needs_note=True, dangerous=True,
)


@admin.register(DeadLetter)
class DeadLetterAdmin(ReadOnlyModelAdmin):
    list_display = ("id", "kind", "attachment_link", "storage_key", "short_error", "created_at",
                    "resolved_at", "resolved_by")
    list_filter = (OpenFilter, "kind")
    search_fields = ("storage_key", "last_error")
    list_select_related = ("attachment",)
    ordering = ("-created_at",)
    actions = ("requeue_dead_letters", "retry_sweep_dead_letters", "abandon_sweep_objects", "resolve_dead_letters")
    fields = ("kind", "attachment_link", "attachment_status", "storage_key", "error", "attempt_history",
              "payload_pretty", "created_at", "resolved_at", "resolved_by")
    readonly_fields = fields

    def get_queryset(self, request):
        # Dead letters with no attachment (unreadable storage events) belong to no tenant: platform staff only.
        return scoped(super().get_queryset(request), request.user, tenant_path="attachment__tenant")

    def has_resolve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("attachments.change_deadletter")

    @admin.display(description="attachment")
    def attachment_link(self, obj: DeadLetter) -> str:
        if obj.attachment_id is None:
            return "—"
        url = reverse("admin:attachments_attachment_change", args=[obj.attachment_id])
        return format_html('<a href="{}">{}</a>', url, obj.attachment.filename if obj.attachment else obj.attachment_id)

    @admin.display(description="attachment status")
    def attachment_status(self, obj: DeadLetter) -> str:
        return obj.attachment.status if obj.attachment else "—"

    @admin.display(description="last error")
    def short_error(self, obj: DeadLetter) -> str:
        return obj.last_error[:120]

    @admin.display(description="error")
    def error(self, obj: DeadLetter) -> str:
        return _pre(obj.last_error) if obj.last_error else "—"

    @admin.display(description="attempt history")
    def attempt_history(self, obj: DeadLetter) -> str:
        rows = [r for r in (obj.history or []) if isinstance(r, dict)]
        if not rows:
            return "—"
        body = format_html_join(
            "", "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((r.get("attempt", ""), r.get("at", ""), r.get("error", "")) for r in rows),
        )
        return format_html('<table class="airlock-history"><thead><tr><th>attempt</th><th>at</th>'
                           "<th>error</th></tr></thead><tbody>{}</tbody></table>", body)

    @admin.display(description="payload")
    def payload_pretty(self, obj: DeadLetter) -> str:
        if not obj.payload:
            return "—"
        return _pre(json.dumps(obj.payload, indent=2, sort_keys=True, ensure_ascii=False, default=str))

    def _confirm_or_run(self, request, queryset, action: ModerationAction, action_name: str):
        letters = list(queryset.select_related("attachment"))
        form, valid, note = (note_form(request, action) if request.POST.get("post") == "yes"
                             else (ModerationNoteForm() if action.needs_note else None, False, ""))
        if not valid:
            return confirmation_page(self, request, action=action, objects=letters, form=form, bulk=True,
                                     action_name=action_name, object_label="dead letter")
        actor = staff_actor(request)
        done, problems = 0, []
        for letter in letters:
            try:
                action.run(letter, actor, note)
            except (TransitionConflict, AirlockError, ValueError) as exc:
                problems.append(f"dead letter #{letter.pk}: {error_text(exc)}")
                continue
            done += 1
            self.log_change(request, letter, f"{action.label} by {actor}" + (f": {note}" if note else ""))
        if done:
            self.message_user(request, f"{action.label}: done for {done} dead letter(s).", messages.SUCCESS)
        for problem in problems:
            self.message_user(request, f"{action.label} refused for {problem}", messages.ERROR)
        return None

    @admin.action(description="Requeue the attachments of selected dead letters…", permissions=["moderate"])
    def requeue_dead_letters(self, request, queryset):
        return self._confirm_or_run(request, queryset, DEAD_LETTER_REQUEUE, "requeue_dead_letters")

    @admin.action(description="Retry deleting the objects of selected sweep dead letters…",
                  permissions=["resolve"])
    def retry_sweep_dead_letters(self, request, queryset):
        return self._confirm_or_run(request, queryset, DEAD_LETTER_RETRY_DELETE, "retry_sweep_dead_letters")

    @admin.action(description="Abandon the objects of selected sweep dead letters (with a reason)…",
                  permissions=["resolve"])
    def abandon_sweep_objects(self, request, queryset):
        return self._confirm_or_run(request, queryset, DEAD_LETTER_ABANDON, "abandon_sweep_objects")

    @admin.action(description="Resolve selected dead letters…", permissions=["resolve"])
    def resolve_dead_letters(self, request, queryset):
        return self._confirm_or_run(request, queryset, DEAD_LETTER_RESOLVE, "resolve_dead_letters")


# --- audit and tenancy ---------------------------------------------------------------

@admin.register(TransitionLog)
class TransitionLogAdmin(ReadOnlyModelAdmin):
    list_display = ("created_at", "attachment_id", "transition", "from_status", "to_status", "actor",
                    "reason_code", "message")
    list_filter = ("transition", "to_status", "reason_code")
    search_fields = ("actor", "message")
    ordering = ("-created_at", "-id")
    show_full_result_count = False

    def get_queryset(self, request):
        return scoped(super().get_queryset(request), request.user, tenant_path="attachment__tenant")


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
except admin.sites.NotRegistered:
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
