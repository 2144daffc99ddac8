"""The sweeper in the admin: one control object with the brakes, and the record of its runs.

The brakes change only through `sweeper_control_set`, which records who and
when; the admin adds Django's LogEntry. Changing them needs
`sweeper.change_sweepercontrol` (the moderator group has it: moderators can
pull the brakes) and, since the sweeper acts for every tenant, platform staff
(attachments.staff_scope): tenant-scoped moderators do not see it.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from attachments.admin.modeladmins import ReadOnlyModelAdmin
from attachments.staff_scope import PlatformStaffOnly

from .control import sweeper_control_get, sweeper_control_set
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
        return HttpResponseRedirect(reverse("admin:sweeper_sweepercontrol_change",
                                            args=[SweeperControl.SINGLETON_PK]))

    def save_model(self, request: HttpRequest, obj: SweeperControl, form, change) -> None:
        actor = f"staff:{request.user.get_username()}"
        state = sweeper_control_set(killswitch=form.cleaned_data["killswitch"],
                                    dry_run=form.cleaned_data["dry_run"], actor=actor)
        obj.refresh_from_db()
        for name, source in (("killswitch", state.killswitch_source), ("dry_run", state.dry_run_source)):
            if source == "settings" and getattr(state, name) != form.cleaned_data[name]:
                self.message_user(
                    request, f"{name} is pinned by AIRLOCK_SWEEPER_{name.upper()} in the environment: "
                             f"the stored value changed, the effective one did not.", messages.WARNING)

    def response_change(self, request, obj):
        state = sweeper_control_get()
        self.message_user(request, f"Sweeper brakes: killswitch {'ON' if state.killswitch else 'off'}, "
                                   f"dry run {'ON' if state.dry_run else 'off'}.", messages.SUCCESS)
        return HttpResponseRedirect(request.path)

    @admin.display(description="in effect now")
    def effective(self, obj: SweeperControl) -> str:
        state = sweeper_control_get()
        return format_html(
            "killswitch <strong>{}</strong> ({}) · dry run <strong>{}</strong> ({})",
            "ON" if state.killswitch else "off", state.killswitch_source,
            "ON" if state.dry_run else "off", state.dry_run_source,
        )

    @admin.display(description="sweep runs")
    def recent_runs(self, obj: SweeperControl) -> str:
        runs = list(SweepRun.objects.order_by("-started_at", "-id")[:RECENT_RUNS])
        if not runs:
            return "No sweep has run yet."
        table = _runs_table(
            "sweeprun", runs,
            ("trigger", "selected", "deleted", "objects deleted", "errors", "dead-lettered", "would delete"),
            lambda run: (run.trigger, run.selected, run.deleted, run.objects_deleted, run.errors,
                         run.dead_lettered,
                         f"{len(_keys(run))} keys" if run.mode == SweepRun.Mode.DRY_RUN else ""))
        dry = next((run for run in runs if run.mode == SweepRun.Mode.DRY_RUN), None)
        would = (format_html("<p>Would delete, latest dry run ({}):</p>{}",
                             dry.started_at.strftime("%Y-%m-%d %H:%M:%S"), _keys_list(_keys(dry)))
                 if dry is not None else "")
        return format_html("{}{}", table, would)

    @admin.display(description="reconcile runs")
    def recent_reconcile_runs(self, obj: SweeperControl) -> str:
        runs = list(ReconcileRun.objects.order_by("-started_at", "-id")[:RECENT_RUNS])
        if not runs:
            return "No reconcile has run yet."
        return _runs_table(
            "reconcilerun", runs, ("scanned", "objects deleted", "would delete", "errors", "note"),
            lambda run: (run.scanned, run.objects_deleted, len(_keys(run)), run.errors, run.note))


def _runs_table(model: str, runs: list, headers: tuple[str, ...], cells) -> str:
    """Recent runs as a table: started (linked to the run), mode, then the given columns (escaped)."""
    head = format_html_join("", "<th>{}</th>", ((h,) for h in ("started", "mode", *headers)))
    rows = format_html_join("", "<tr>{}</tr>", (
        (format_html('<td><a href="{}">{}</a></td><td>{}</td>{}',
                     reverse(f"admin:sweeper_{model}_change", args=[run.pk]),
                     run.started_at.strftime("%Y-%m-%d %H:%M:%S"), run.mode,
                     format_html_join("", "<td>{}</td>", ((c,) for c in cells(run)))),)
        for run in runs))
    return format_html('<table class="airlock-runs"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>',
                       head, rows)


class _RunAdmin(PlatformStaffOnly, ReadOnlyModelAdmin):
    list_filter = ("mode", "trigger")
    ordering = ("-started_at", "-id")

    @admin.display(description="would-delete keys (dry run)")
    def would_delete_keys(self, obj: SweepRun | ReconcileRun) -> str:
        return _keys_list(_keys(obj), limit=1000)


@admin.register(ReconcileRun)
class ReconcileRunAdmin(_RunAdmin):
    list_display = ("started_at", "finished_at", "mode", "trigger", "scanned", "objects_deleted", "kept",
                    "expired_leases", "redriven", "errors", "note")
    fields = ("started_at", "finished_at", "mode", "trigger", "note", "scanned", "counts", "objects_deleted",
              "kept", "expired_leases", "redriven", "errors", "errors_text", "would_delete_keys")
    readonly_fields = fields


@admin.register(SweepRun)
class SweepRunAdmin(_RunAdmin):
    list_display = ("started_at", "finished_at", "mode", "trigger", "selected", "deleted", "objects_deleted",
                    "errors", "dead_lettered", "hard_deleted", "would_delete_count")
    fields = ("started_at", "finished_at", "mode", "trigger", "selected", "deleted", "objects_deleted",
              "errors", "dead_lettered", "hard_deleted", "purged", "never_uploaded", "errors_pretty",
              "would_delete_keys")
    readonly_fields = fields

    @admin.display(description="would delete")
    def would_delete_count(self, obj: SweepRun) -> int:
        return len(_keys(obj))

    @admin.display(description="errors")
    def errors_pretty(self, obj: SweepRun) -> str:
        if not obj.errors_text:
            return "—"
        return format_html('<pre class="airlock-pre">{}</pre>', obj.errors_text)


