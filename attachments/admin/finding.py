"""Finding a file in the console: search by ref, subject, owner, tenant, filename, id and digest; saved questions.

Support staff start from a ticket that names the owning object ("my wedding
video": `wedding:smith-2026`), a person, or a file name; the search box takes
any of them. `ref:wedding:smith` narrows to refs starting with that text (an
exact ref is its own prefix); a bare term also matches ref prefixes.
`subject:user-42` lists the files of one of a host's people (the id the host
sends in `Airlock-Subject`), exactly; a bare term matches a subject exactly too.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.contrib import admin
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from ..models import Approval, Attachment, DeadLetter, Status, TransitionLog
from ..services import backlog

REF_PREFIX = "ref:"
SUBJECT_PREFIX = "subject:"
# The saved question "stuck": files uploaded (or being processed) this long ago and not settled.
STUCK_MINUTES = 30


def search_query(term: str) -> Q | None:
    """The rows one search term matches, or None for an empty term."""
    term = term.strip()
    if not term:
        return None
    if term.lower().startswith(REF_PREFIX):
        ref = term[len(REF_PREFIX) :].strip()
        # `ref__startswith` is a range scan on an index where one exists; exact refs are their own prefix.
        return Q(ref__startswith=ref) if ref else Q(ref__isnull=False)
    if term.lower().startswith(SUBJECT_PREFIX):
        # Exact, as the host sent it (case and inner spaces count): index att_tenant_subject within a tenant.
        return Q(subject=term[len(SUBJECT_PREFIX) :].strip())
    query = (
        Q(ref__startswith=term)
        | Q(subject=term)
        | Q(filename__icontains=term)
        | Q(owner__username__icontains=term)
        | Q(tenant__slug__iexact=term)
        | Q(sha256=term.lower())
    )
    try:
        query |= Q(pk=uuid.UUID(term))
    except ValueError:
        pass
    return query


def with_open_dead_letter(queryset: QuerySet[Attachment]) -> QuerySet[Attachment]:
    letters = DeadLetter.objects.filter(attachment=OuterRef("pk"), resolved_at__isnull=True)
    return queryset.filter(Exists(letters))


class SavedQuestionFilter(admin.SimpleListFilter):
    """The questions support asks every day, one link each on the list page."""

    title = "saved questions"
    parameter_name = "question"

    def lookups(self, request, model_admin):
        return (
            ("stuck", f"Stuck over {STUCK_MINUTES} minutes"),
            ("late", "Late past the backlog limit (uploads pause)"),
            ("rejected_today", "Rejected today (pick a reason below)"),
            ("dead_letters", "Waiting in dead letters"),
            ("awaiting_approval", "Waiting for approval (guests' files)"),
        )

    def queryset(self, request, queryset):
        now = timezone.now()
        if self.value() == "stuck":
            return queryset.filter(
                status__in=(Status.PENDING, Status.PROCESSING), uploaded_at__lt=now - timedelta(minutes=STUCK_MINUTES)
            )
        if self.value() == "late":
            return backlog.late_uploads(queryset)
        if self.value() == "rejected_today":
            today = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
            # Rejected today by the timeline, not updated_at (a later heartbeat or commit moves that).
            rejected = TransitionLog.objects.filter(
                attachment=OuterRef("pk"), to_status=Status.REJECTED, created_at__gte=today
            )
            return queryset.filter(Exists(rejected), status=Status.REJECTED)
        if self.value() == "dead_letters":
            return with_open_dead_letter(queryset)
        if self.value() == "awaiting_approval":
            return queryset.filter(approval=Approval.PENDING)
        return queryset
