"""The sweeper in the admin: one control object with the brakes, and the record of its runs.

The brakes change only through `sweeper_control_set`, which records who and
when; the admin adds Django's LogEntry. Changing them needs
`sweeper.change_sweepercontrol` (the moderator group has it: moderators can
pull the brakes) and, since the sweeper acts for every tenant, platform staff
(attachments.staff_scope): tenant-scoped moderators do not see it.
"""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.exceptions import NotRegistered
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from attachments.admin.actions import (
    ModerationAction,
    ModerationNoteForm,
    confirmation_page,
    cross_tenant_refusal,
    error_text,
    note_form,
    staff_actor,
)
from attachments.admin.detail import preformatted
from attachments.admin.modeladmins import ReadOnlyModelAdmin
from attachments.errors import AirlockError
from attachments.models import DeadLetter
from attachments.retention.services.erasure import erasure_scope_user
from attachments.services.moderation import dead_letter_requeue, dead_letter_resolve
from attachments.services.transitions import TransitionConflict
from attachments.staff_scope import PlatformStaffOnly, scoped

from .control import sweeper_control_get, sweeper_control_set
from .dead_letters import (
    DeadLetterRefused,
    sweep_dead_letter_abandon,
    sweep_dead_letter_resolve,
    sweep_dead_letter_retry,
)
from .erasure import erase
from .models import ReconcileRun, SweeperControl, SweepRun

RECENT_RUNS = 15
KEYS_SHOWN = 50


def _keys(run: SweepRun | ReconcileRun) -> list[str]:
    return [str(k) for k in (run.would_delete or [])]


def _keys_list(keys: list[str], limit: int = KEYS_SHOWN) -> str:
    if not keys:
        return "—"
    shown = format_html_join("", "<li><code>{}</code></li>", ((k,) for k in keys[:limit]))
    more = f"… and {len(keys) - limit} more" if len(keys) > limit else ""
    return format_html('<ul class="airlock-keys">{}</ul>{}', shown, more)


class SweeperControlForm(forms.ModelForm):
    class Meta:
        model = SweeperControl
        fields = ("killswitch", "dry_run")


@admin.register(SweeperControl)
class SweeperControlAdmin(PlatformStaffOnly, admin.ModelAdmin):  # brakes for every tenant
    form = SweeperControlForm
    fieldsets = (
        ("Brakes", {"fields": ("killswitch", "dry_run", "effective", "changed_by", "changed_at")}),
        ("Recent sweep runs", {"fields": ("recent_runs",)}),
        ("Recent reconcile runs", {"fields": ("recent_reconcile_runs",)}),
    )
    readonly_fields = ("effective", "changed_by", "changed_at", "recent_runs", "recent_reconcile_runs")

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_object(self, request, object_id, from_field=None):
        # A singleton: show the stored row, or the defaults before anyone changed them.
        if str(object_id) != str(SweeperControl.SINGLETON_PK):
            return None
        return SweeperControl.objects.filter(pk=SweeperControl.SINGLETON_PK).first() or SweeperControl()

    def changelist_view(self, request, extra_context=None):
        """There is one control object: go straight to it."""
        if not self.has_view_or_change_permission(request):
            return super().changelist_view(request, extra_context)
        return HttpResponseRedirect(reverse("admin:sweeper_sweepercontrol_change", args=[SweeperControl.SINGLETON_PK]))

    def save_model(self, request: HttpRequest, obj: SweeperControl, form, change) -> None:
        actor = f"staff:{request.user.get_username()}"
        state = sweeper_control_set(
            killswitch=form.cleaned_data["killswitch"], dry_run=form.cleaned_data["dry_run"], actor=actor
        )
        obj.refresh_from_db()
        for name, source in (("killswitch", state.killswitch_source), ("dry_run", state.dry_run_source)):
            if source == "settings" and getattr(state, name) != form.cleaned_data[name]:
                self.message_user(
                    request,
                    f"{name} is pinned by AIRLOCK_SWEEPER_{name.upper()} in the environment: "
                    f"the stored value changed, the effective one did not.",
                    messages.WARNING,
                )

    def response_change(self, request, obj):
        state = sweeper_control_get()
        self.message_user(
            request,
            f"Sweeper brakes: killswitch {'ON' if state.killswitch else 'off'}, "
            f"dry run {'ON' if state.dry_run else 'off'}.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(request.path)

    @admin.display(description="in effect now")
    def effective(self, obj: SweeperControl) -> str:
        state = sweeper_control_get()
        return format_html(
            "killswitch <strong>{}</strong> ({}) · dry run <strong>{}</strong> ({})",
            "ON" if state.killswitch else "off",
            state.killswitch_source,
            "ON" if state.dry_run else "off",
            state.dry_run_source,
        )

    @admin.display(description="sweep runs")
    def recent_runs(self, obj: SweeperControl) -> str:
        runs = list(SweepRun.objects.order_by("-started_at", "-id")[:RECENT_RUNS])
        if not runs:
            return "No sweep has run yet."
        table = _runs_table(
            "sweeprun",
            runs,
            ("trigger", "selected", "deleted", "objects deleted", "errors", "dead-lettered", "would delete"),
            lambda run: (
                run.trigger,
                run.selected,
                run.deleted,
                run.objects_deleted,
                run.errors,
                run.dead_lettered,
                f"{len(_keys(run))} keys" if run.mode == SweepRun.Mode.DRY_RUN else "",
            ),
        )
        dry = next((run for run in runs if run.mode == SweepRun.Mode.DRY_RUN), None)
        would = (
            format_html(
                "<p>Would delete, latest dry run ({}):</p>{}",
                dry.started_at.strftime("%Y-%m-%d %H:%M:%S"),
                _keys_list(_keys(dry)),
            )
            if dry is not None
            else ""
        )
        return format_html("{}{}", table, would)

    @admin.display(description="reconcile runs")
    def recent_reconcile_runs(self, obj: SweeperControl) -> str:
        runs = list(ReconcileRun.objects.order_by("-started_at", "-id")[:RECENT_RUNS])
        if not runs:
            return "No reconcile has run yet."
        return _runs_table(
            "reconcilerun",
            runs,
            ("scanned", "objects deleted", "would delete", "errors", "note"),
            lambda run: (run.scanned, run.objects_deleted, len(_keys(run)), run.errors, run.note),
        )


def _runs_table(model: str, runs: list, headers: tuple[str, ...], cells) -> str:
    """Recent runs as a table: started (linked to the run), mode, then the given columns (escaped)."""
    head = format_html_join("", "<th>{}</th>", ((h,) for h in ("started", "mode", *headers)))
    rows = format_html_join(
        "",
        "<tr>{}</tr>",
        (
            (
                format_html(
                    '<td><a href="{}">{}</a></td><td>{}</td>{}',
                    reverse(f"admin:sweeper_{model}_change", args=[run.pk]),
                    run.started_at.strftime("%Y-%m-%d %H:%M:%S"),
                    run.mode,
                    format_html_join("", "<td>{}</td>", ((c,) for c in cells(run))),
                ),
            )
            for run in runs
        ),
    )
    return format_html('<table class="airlock-runs"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>', head, rows)


class _RunAdmin(PlatformStaffOnly, ReadOnlyModelAdmin):
    list_filter = ("mode", "trigger")
    ordering = ("-started_at", "-id")

    @admin.display(description="would-delete keys (dry run)")
    def would_delete_keys(self, obj: SweepRun | ReconcileRun) -> str:
        return _keys_list(_keys(obj), limit=1000)


@admin.register(ReconcileRun)
class ReconcileRunAdmin(_RunAdmin):
    list_display = (
        "started_at",
        "finished_at",
        "mode",
        "trigger",
        "scanned",
        "objects_deleted",
        "kept",
        "expired_leases",
        "redriven",
        "errors",
        "note",
    )
    fields = (
        "started_at",
        "finished_at",
        "mode",
        "trigger",
        "note",
        "scanned",
        "counts",
        "objects_deleted",
        "kept",
        "expired_leases",
        "redriven",
        "errors",
        "errors_text",
        "would_delete_keys",
    )
    readonly_fields = fields


@admin.register(SweepRun)
class SweepRunAdmin(_RunAdmin):
    # The list's columns: every count but the two only the run's page shows (purged is a dict per table).
    list_display = (
        "started_at",
        "finished_at",
        "mode",
        "trigger",
        *(name for name in SweepRun.COUNTS if name not in ("purged", "never_uploaded")),
        "would_delete_count",
    )
    fields = ("started_at", "finished_at", "mode", "trigger", *SweepRun.COUNTS, "errors_pretty", "would_delete_keys")
    readonly_fields = fields

    @admin.display(description="would delete")
    def would_delete_count(self, obj: SweepRun) -> int:
        return len(_keys(obj))

    @admin.display(description="errors")
    def errors_pretty(self, obj: SweepRun) -> str:
        if not obj.errors_text:
            return "—"
        return format_html('<pre class="airlock-pre">{}</pre>', obj.errors_text)


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
    dead_letter_requeue(letter=letter, actor=actor)


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
    "requeue",
    "Requeue",
    "The failed attachment of each dead letter goes back to pending with fresh attempts and is enqueued "
    "again (a rendition dead letter: the video's web rendition is made again, the file stays served); the "
    "dead letter is resolved. Dead letters without an attachment cannot be requeued here.",
    _requeue,
)
DEAD_LETTER_RESOLVE = ModerationAction(
    "resolve",
    "Resolve",
    "The dead letters are marked resolved (by you, now); nothing is retried. A sweep dead letter is "
    "resolved only once storage confirms its objects are gone (or they were abandoned).",
    _resolve,
)
DEAD_LETTER_RETRY_DELETE = ModerationAction(
    "retry_delete",
    "Retry the delete",
    "The objects of each sweep dead letter are deleted now (unless a sweeper brake is on). When every "
    "one is gone the row is marked deleted and the letter resolved; otherwise you are told which failed.",
    _retry_delete,
    dangerous=True,
)
DEAD_LETTER_ABANDON = ModerationAction(
    "abandon",
    "Abandon the objects",
    "Give up deleting the objects of each sweep dead letter: the row is marked deleted and the letter "
    "resolved, with your reason in the audit trail. Reconcile keeps trying the leftovers.",
    _abandon,
    needs_note=True,
    dangerous=True,
)


@admin.register(DeadLetter)
class DeadLetterAdmin(ReadOnlyModelAdmin):
    list_display = (
        "id",
        "kind",
        "attachment_link",
        "storage_key",
        "short_error",
        "created_at",
        "resolved_at",
        "resolved_by",
    )
    list_filter = (OpenFilter, "kind")
    search_fields = ("storage_key", "last_error")
    list_select_related = ("attachment",)
    ordering = ("-created_at",)
    actions = ("requeue_dead_letters", "retry_sweep_dead_letters", "abandon_sweep_objects", "resolve_dead_letters")
    fields = (
        "kind",
        "attachment_link",
        "attachment_status",
        "storage_key",
        "error",
        "attempt_history",
        "payload_pretty",
        "created_at",
        "resolved_at",
        "resolved_by",
    )
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
        return preformatted(obj.last_error) if obj.last_error else "—"

    @admin.display(description="attempt history")
    def attempt_history(self, obj: DeadLetter) -> str:
        rows = [r for r in (obj.history or []) if isinstance(r, dict)]
        if not rows:
            return "—"
        body = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((r.get("attempt", ""), r.get("at", ""), r.get("error", "")) for r in rows),
        )
        return format_html(
            '<table class="airlock-history"><thead><tr><th>attempt</th><th>at</th>'
            "<th>error</th></tr></thead><tbody>{}</tbody></table>",
            body,
        )

    @admin.display(description="payload")
    def payload_pretty(self, obj: DeadLetter) -> str:
        if not obj.payload:
            return "—"
        return preformatted(json.dumps(obj.payload, indent=2, sort_keys=True, ensure_ascii=False, default=str))

    def _confirm_or_run(self, request, queryset, action: ModerationAction, action_name: str):
        letters = list(queryset.select_related("attachment__tenant"))  # the confirmation names tenants
        refusal = cross_tenant_refusal(
            request,
            letters,
            tenant_of=lambda letter: letter.attachment.tenant_id if letter.attachment else None,
            noun="dead letter",
        )
        if refusal:
            self.message_user(request, refusal, messages.ERROR)
            return None
        form, valid, note = (
            note_form(request, action)
            if request.POST.get("post") == "yes"
            else (ModerationNoteForm() if action.needs_note else None, False, "")
        )
        if not valid:
            return confirmation_page(
                self,
                request,
                action=action,
                objects=letters,
                form=form,
                bulk=True,
                action_name=action_name,
                object_label="dead letter",
            )
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

    @admin.action(description="Retry deleting the objects of selected sweep dead letters…", permissions=["resolve"])
    def retry_sweep_dead_letters(self, request, queryset):
        return self._confirm_or_run(request, queryset, DEAD_LETTER_RETRY_DELETE, "retry_sweep_dead_letters")

    @admin.action(
        description="Abandon the objects of selected sweep dead letters (with a reason)…", permissions=["resolve"]
    )
    def abandon_sweep_objects(self, request, queryset):
        return self._confirm_or_run(request, queryset, DEAD_LETTER_ABANDON, "abandon_sweep_objects")

    @admin.action(description="Resolve selected dead letters…", permissions=["resolve"])
    def resolve_dead_letters(self, request, queryset):
        return self._confirm_or_run(request, queryset, DEAD_LETTER_RESOLVE, "resolve_dead_letters")


# --- erasure of users (platform staff) ------------------------------------------------------

ERASE_ACTION = ModerationAction(
    "erase",
    "Erase",
    "Platform staff only. Everything each user owns (staged and committed, every status) is let go and its "
    "objects removed now, without the release grace; their API tokens are revoked; each removed file sends "
    "attachment.deleted. Files under a legal hold are skipped. This cannot be undone. What it would do now:",
    lambda user, actor, note: None,
    dangerous=True,
    platform_only=True,
)


class ErasableUserAdmin(UserAdmin):
    """Django's user admin, plus the erasure of selected users (what `manage.py erase_user` does)."""

    actions = ["erase_users"]

    def get_actions(self, request):
        actions = super().get_actions(request)
        if not ERASE_ACTION.allowed(request):
            actions.pop("erase_users", None)
        return actions

    @admin.action(description="Erase selected users (files and API tokens)…")
    def erase_users(self, request: HttpRequest, queryset):
        if not ERASE_ACTION.allowed(request):
            raise PermissionDenied
        users = list(queryset.order_by("pk"))
        actor = staff_actor(request)
        if request.POST.get("post") == "yes":
            for user in users:
                result = erase(erasure_scope_user(user.get_username()), actor=actor)
                self.log_change(request, user, f"Erased by {actor}: " + " ".join(result.summary()))
                level = messages.WARNING if result.errors or result.deferred else messages.SUCCESS
                for line in result.summary():
                    self.message_user(request, line, level)
            return None
        for user in users:
            user.erasure_plan = erase(erasure_scope_user(user.get_username()), actor=actor, dry_run=True).summary()
        return confirmation_page(
            self,
            request,
            action=ERASE_ACTION,
            objects=users,
            form=None,
            bulk=True,
            action_name="erase_users",
            object_label="user",
        )


User = get_user_model()
try:
    admin.site.unregister(User)
except NotRegistered:
    pass
admin.site.register(User, ErasableUserAdmin)
