"""Moderation actions for the admin: confirm first, then call the service, then audit.

Each action calls a service (attachments.services.*) with the actor
"staff:<username>", which the services write to the TransitionLog; the admin
adds Django's LogEntry naming the staff member.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from ..errors import AirlockError, NotRestorable
from ..models import Attachment, Lifecycle, Status
from ..reasons import ReasonCode
from ..retention.services.holds import attachment_hold_clear, attachment_hold_set
from ..retention.services.release import attachment_restore as attachment_restore_released
from ..selectors import is_held
from ..services.lifecycle import attachment_discard
from ..services.moderation import (
    attachment_reprocess,
    attachment_requeue,
    attachment_rescan,
    attachment_restore,
    attachment_take_down,
    attachment_variants_purge,
)
from ..services.transitions import TransitionConflict
from ..staff_scope import is_platform_staff, staff_tenant_id

MODERATE_PERMISSION = "attachments.moderate_attachment"


def staff_actor(request: HttpRequest) -> str:
    return f"staff:{request.user.get_username()}"


# --- moderation actions ----------------------------------------------------------


@dataclass(frozen=True)
class ModerationAction:
    name: str
    label: str
    explanation: str
    run: Callable[[Any, str, str], object]  # (attachment or dead letter, actor, note); the result is not used
    needs_note: bool = False
    dangerous: bool = False
    # Whether the detail page offers it (the service still decides; bulk offers every action).
    offered: Callable[[Attachment], bool] = lambda a: True
    # Platform staff only (legal holds): hidden from, and refused to, tenant-scoped moderators.
    platform_only: bool = False

    def allowed(self, request: HttpRequest) -> bool:
        return not self.platform_only or is_platform_staff(request.user)


def _discard(attachment: Attachment, actor: str, note: str) -> None:
    # The lifecycle service acts for the owner: the sweeper reaps it on its next tick.
    attachment_discard(user=attachment.owner, attachment_id=attachment.pk, actor=actor)


def _restore_released(attachment: Attachment, actor: str, note: str) -> None:
    # A hold freezes the file as it was released (the evidence): platform staff clear it first.
    if is_held(attachment):
        raise NotRestorable(
            "The file is under a legal hold: platform staff must clear the hold before it can be restored."
        )
    # The release service acts for the owner (as the API's moderator route does), the staff member as actor.
    attachment_restore_released(user=attachment.owner, attachment_id=attachment.pk, actor=actor)


MODERATION_ACTIONS: dict[str, ModerationAction] = {
    action.name: action
    for action in (
        ModerationAction(
            "requeue",
            "Requeue",
            "Failed (dead-lettered) or stuck attachments go back to pending with fresh attempts "
            "and are enqueued again; their open dead letters are resolved.",
            lambda a, actor, note: attachment_requeue(attachment_id=a.pk, actor=actor),
            offered=lambda a: a.status in (Status.FAILED, Status.PROCESSING),
        ),
        ModerationAction(
            "rescan",
            "Rescan",
            "Ready attachments are scanned again now with the signatures in force. They stay "
            "ready and served meanwhile; only a new hit takes one down (rejected, malware).",
            lambda a, actor, note: attachment_rescan(attachment_id=a.pk, actor=actor),
            offered=lambda a: a.status == Status.READY,
        ),
        ModerationAction(
            "reprocess",
            "Reprocess",
            "Ready attachments go back to pending and through the whole pipeline again "
            "(new derivatives). They are not served until ready again.",
            lambda a, actor, note: attachment_reprocess(attachment_id=a.pk, actor=actor),
            offered=lambda a: a.status == Status.READY,
        ),
        ModerationAction(
            "take_down",
            "Take down",
            "The attachments become rejected with reason “moderator”: serving stops at once, "
            "for everyone, the owner included.",
            lambda a, actor, note: attachment_take_down(attachment_id=a.pk, actor=actor, note=note),
            needs_note=True,
            dangerous=True,
            offered=lambda a: a.status in (Status.PENDING, Status.PROCESSING, Status.READY),
        ),
        ModerationAction(
            "restore",
            "Restore takedown",
            "Attachments taken down by a moderator go back to pending and through the pipeline "
            "before anything is served again.",
            lambda a, actor, note: attachment_restore(attachment_id=a.pk, actor=actor),
            offered=lambda a: a.status == Status.REJECTED and a.reason_code == ReasonCode.MODERATOR,
        ),
        ModerationAction(
            "restore_released",
            "Restore released file",
            "Released files (let go by their owner or a moderator, waiting for the sweeper) are "
            "committed again to their ref and served again, while their grace lasts. After the grace, "
            "or for a file under a legal hold, never released or already deleted, nothing is done.",
            _restore_released,
            offered=lambda a: a.lifecycle == Lifecycle.RELEASED,
        ),
        ModerationAction(
            "legal_hold",
            "Place legal hold",
            "Platform staff only. The attachments are kept from every delete path (discard, DELETE, release, "
            "commit replace, the sweeper, reconciliation, erasure) until the hold is cleared; the API answers "
            "409 LEGAL_HOLD and shows legal_hold: true.",
            lambda a, actor, note: attachment_hold_set(attachment_ids=[a.pk], actor=actor, reason=note),
            needs_note=True,
            platform_only=True,
            offered=lambda a: not a.legal_hold and a.lifecycle != Lifecycle.DELETED,
        ),
        ModerationAction(
            "clear_legal_hold",
            "Clear legal hold",
            "Platform staff only. The attachments' own holds are lifted (a hold on their ref stays): "
            "an expired, discarded or released file is then due to the sweeper again.",
            lambda a, actor, note: attachment_hold_clear(attachment_ids=[a.pk], actor=actor, reason=note),
            needs_note=True,
            platform_only=True,
            offered=lambda a: a.legal_hold,
        ),
        ModerationAction(
            "purge_variants",
            "Purge variants",
            "The attachments' named variants (the sizes made on request for galleries) are deleted; "
            "the next request for one makes it again. The files themselves do not change. Deletes wait "
            "while a sweeper brake is on (reconcile removes the objects later).",
            lambda a, actor, note: attachment_variants_purge(attachment_id=a.pk, actor=actor),
            # The change page's variants box offers it, beside what it deletes (attachments/variants/admin.py).
            offered=lambda a: False,
        ),
        ModerationAction(
            "discard",
            "Discard",
            "Staged attachments are marked discarded: the sweeper deletes their files on its next "
            "run. Committed attachments cannot be discarded.",
            _discard,
            dangerous=True,
            offered=lambda a: a.lifecycle == Lifecycle.STAGED,
        ),
    )
}


class ModerationNoteForm(forms.Form):
    note = forms.CharField(
        label="Note (shown as the reason, kept in the audit log)",
        max_length=500,
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
    )


def error_text(exc: Exception) -> str:
    if isinstance(exc, AirlockError):
        return f"{exc.code}: {exc.message}"
    return str(exc) or type(exc).__name__


def perform_moderation(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    action: ModerationAction,
    attachments: Iterable[Attachment],
    note: str,
) -> tuple[int, list[str]]:
    """Run one action on each attachment; return how many worked and what failed."""
    if not action.allowed(request):
        raise PermissionDenied
    actor = staff_actor(request)
    done, problems = 0, []
    for attachment in attachments:
        try:
            action.run(attachment, actor, note)
        except (TransitionConflict, AirlockError) as exc:
            problems.append(f"{attachment.filename} ({attachment.pk}): {error_text(exc)}")
            continue
        done += 1
        modeladmin.log_change(request, attachment, f"{action.label} by {actor}" + (f": {note}" if note else ""))
    return done, problems


def report(modeladmin: admin.ModelAdmin, request: HttpRequest, label: str, done: int, problems: list[str]) -> None:
    if done:
        modeladmin.message_user(request, f"{label}: done for {done} attachment(s).", messages.SUCCESS)
    for problem in problems:
        modeladmin.message_user(request, f"{label} refused for {problem}", messages.ERROR)


def confirmation_page(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    *,
    action: ModerationAction,
    objects: list,
    form: ModerationNoteForm | None,
    bulk: bool,
    action_name: str = "",
    object_label: str = "attachment",
) -> TemplateResponse:
    opts = modeladmin.model._meta
    # Which tenants the set touches, said before anything runs (dead letters reach it through their file).
    tenants = sorted({slug for slug in (_tenant_slug(obj) for obj in objects) if slug})
    context = {
        "tenants": tenants,
        **modeladmin.admin_site.each_context(request),
        "title": f"{action.label}: are you sure?",
        "opts": opts,
        "action": action,
        "action_name": action_name,
        "objects": objects,
        "object_label": object_label,
        "form": form,
        "bulk": bulk,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "media": modeladmin.media,
    }
    return TemplateResponse(request, "admin/attachments/confirm_action.html", context)


def _tenant_slug(obj: Any) -> str:
    attachment = obj if isinstance(obj, Attachment) else getattr(obj, "attachment", None)
    return attachment.tenant.slug if attachment is not None else ""


def cross_tenant_refusal(
    request: HttpRequest,
    objects: Sequence[Any],
    *,
    tenant_of: Callable[[Any], Any] = lambda obj: obj.tenant_id,
    noun: str = "attachment",
) -> str:
    """Why a tenant-scoped moderator may not run this set, or "" when they may.

    Their queryset is already cut to their tenant, so a selection naming other
    rows (a crafted POST, a stale page after a tenant move) would silently shrink:
    refuse it whole instead, so nobody believes more was done than was.
    """
    tenant_id = staff_tenant_id(request.user)
    if tenant_id is None:
        return ""  # platform staff act across tenants; the confirmation page names them
    foreign = [obj for obj in objects if tenant_of(obj) != tenant_id]
    selected = set(request.POST.getlist(helpers.ACTION_CHECKBOX_NAME))
    missing = len(selected - {str(obj.pk) for obj in objects}) if request.POST.get("select_across") != "1" else 0
    if foreign or missing:
        return (
            f"{len(foreign) + missing} selected {noun}(s) belong to another tenant than yours or are "
            "not yours to moderate: nothing was done. Select those of your tenant only."
        )
    return ""


def note_form(request: HttpRequest, action: ModerationAction) -> tuple[ModerationNoteForm | None, bool, str]:
    """(form, valid, note) from a confirmation POST."""
    if not action.needs_note:
        return None, True, ""
    form = ModerationNoteForm(request.POST)
    if not form.is_valid():
        return form, False, ""
    note = form.cleaned_data["note"].strip()
    if not note:
        form.add_error("note", "Say why: the note is the reason users and the audit log see.")
        return form, False, ""
    return form, True, note


def bulk_action(name: str):
    action = MODERATION_ACTIONS[name]

    @admin.action(description=f"{action.label} selected attachments…", permissions=["moderate"])
    def run(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Attachment]):
        objects = list(queryset.select_related("owner", "tenant"))
        refusal = cross_tenant_refusal(request, objects)
        if refusal:
            modeladmin.message_user(request, refusal, messages.ERROR)
            return None
        if request.POST.get("post") == "yes":
            form, valid, note = note_form(request, action)
            if valid:
                done, problems = perform_moderation(modeladmin, request, action, objects, note)
                report(modeladmin, request, action.label, done, problems)
                return None
        else:
            form = ModerationNoteForm() if action.needs_note else None
        return confirmation_page(
            modeladmin, request, action=action, objects=objects, form=form, bulk=True, action_name=f"moderate_{name}"
        )

    run.__name__ = f"moderate_{name}"
    return run
