"""Guest links in the console: the upload links' list and the approval queue.

The approval queue: what guests sent through a link that asks for approval, as a grid to decide on.
A moderator opens one queue per upload link (`?link=<id>`) or per ref (`?ref=…`, every
link of that ref), sees the waiting files' sandbox-made thumbnails and video posters,
selects many and approves or declines them at once. The decision is the approval
service's (services/approval.py), which audits it with the staff member as
the actor and announces it; declining goes through a confirmation first, since the
files are then discarded. Without a link or ref the page lists the queues that wait.

Upload links: each with how many of its guests' files wait for approval, and its queue. Read-only
here: links are made, and disabled, through the API by the host's service account. Staff who may see
a tenant's attachments may see its links.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count, Exists, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.defaultfilters import filesizeformat
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode

from ..admin.actions import MODERATE_PERMISSION, error_text, staff_actor
from ..admin.media import format_duration
from ..errors import AirlockError
from ..models import Approval, Attachment, Derivative, Lifecycle, UploadLink
from ..services.ids import parse_ids
from ..staff_scope import is_platform_staff, scoped
from .services.approval import attachments_approve, attachments_decline

VIEW_PERMISSION = "attachments.view_attachment"
# One page of the grid; well under the service's limit of ids per call.
PAGE_SIZE = 60


# --- selectors -------------------------------------------------------------------------


# Removed by its guest (discarded, then swept): nothing left to decide.
GONE = (Lifecycle.DISCARDED, Lifecycle.DELETED)


def waiting_q(*, link: UploadLink | None = None, ref: str | None = None) -> Q:
    """Files waiting for a decision, of one link or of one ref (a waiting file reaches its ref by its link)."""
    query = Q(approval=Approval.PENDING) & ~Q(lifecycle__in=GONE)
    if link is not None:
        return query & Q(upload_link=link)
    if ref is not None:
        return query & (Q(upload_link__ref=ref) | Q(ref=ref))
    return query


def queue_files(user: Any, *, link: UploadLink | None = None, ref: str | None = None) -> QuerySet[Attachment]:
    """The queue as `user` may see it (their tenant's files only, unless platform staff), oldest first."""
    return (
        scoped(Attachment.objects.filter(waiting_q(link=link, ref=ref)), user)
        .select_related("tenant")
        .annotate(
            has_thumbnail=Exists(Derivative.objects.filter(attachment=OuterRef("pk"), kind="thumbnail")),
            has_poster=Exists(Derivative.objects.filter(attachment=OuterRef("pk"), kind="poster")),
        )
        .order_by("created_at", "pk")
    )


def _waiting_of_link() -> QuerySet[Attachment]:
    # Read from the queue's partial index (att_approval_queue: upload_link, created_at where pending).
    return Attachment.objects.filter(upload_link=OuterRef("pk"), approval=Approval.PENDING).exclude(lifecycle__in=GONE)


def with_waiting_count(links: QuerySet[UploadLink]) -> QuerySet[UploadLink]:
    """Each link with `waiting`: how many of its files wait for approval."""
    waiting = _waiting_of_link().order_by().values("upload_link").annotate(n=Count("pk")).values("n")
    return links.annotate(waiting=Coalesce(Subquery(waiting, output_field=IntegerField()), Value(0)))


def waiting_links(user: Any) -> QuerySet[UploadLink]:
    """The links `user` may moderate that have files waiting, the longest queue first."""
    return (
        with_waiting_count(scoped(UploadLink.objects.filter(Exists(_waiting_of_link())), user))
        .select_related("tenant")
        .order_by(F("waiting").desc(), "ref")
    )


# --- decisions -------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    verb: str  # approve | decline
    label: str
    done: str


DECISIONS = {
    "approve": Decision("approve", "Approve", "approved"),
    "decline": Decision("decline", "Decline", "declined"),
}


def _deciders(request: HttpRequest, files: list[Attachment]) -> dict[AbstractBaseUser, list[str]]:
    """Whom the service acts for, with the ids each decides on.

    A tenant's moderator decides as themselves (the service admits their tenant's
    files). Platform staff belong to no tenant they moderate: they decide for each
    file's owner (the link's account), while the audit names them as the actor.
    """
    if not is_platform_staff(request.user):
        return {request.user: [str(f.pk) for f in files]}  # type: ignore[dict-item]
    by_owner: dict[AbstractBaseUser, list[str]] = defaultdict(list)
    for attachment in files:
        by_owner[attachment.owner].append(str(attachment.pk))
    return by_owner


def decide(request: HttpRequest, decision: Decision, files: list[Attachment]) -> list[str]:
    """Run the approval service on the files; return the ids it changed (the rest were decided already)."""
    actor = staff_actor(request)
    service = attachments_approve if decision.verb == "approve" else attachments_decline
    changed: list[str] = []
    for user, ids in _deciders(request, files).items():
        changed += service(user=user, ids=ids, actor=actor)
    done = set(changed)
    # Django's admin log beside the service's audit, as the console's other actions leave it; one insert.
    assert request.user.pk is not None  # admin_view admits signed-in staff only
    LogEntry.objects.log_actions(
        request.user.pk,
        [f for f in files if str(f.pk) in done],
        CHANGE,
        f"{decision.done.capitalize()} by {actor}",
    )
    return changed


# --- views -----------------------------------------------------------------------------


def _queue_target(request: HttpRequest) -> tuple[UploadLink | None, str | None]:
    """The link or ref the page is about, from its query; a link out of the staff member's reach is a 404."""
    # The query string names the queue; the page's forms post back to the same address.
    raw_link, ref = request.GET.get("link", "").strip(), request.GET.get("ref", "").strip()
    if raw_link:
        try:
            link_id = uuid.UUID(raw_link)
        except ValueError:
            raise Http404("no such upload link") from None
        link = scoped(UploadLink.objects.select_related("tenant"), request.user).filter(pk=link_id).first()
        if link is None:
            raise Http404("no such upload link")
        return link, None
    if len(ref) > 200:
        raise Http404("no such ref")
    return None, ref or None


def queue_url(*, link: UploadLink | None = None, link_id: object = None, ref: str | None = None) -> str:
    """The queue of a link (or of the link with `link_id`), of a ref, or the list of queues."""
    base = reverse("admin:attachments_attachment_approval")
    if link is not None or link_id is not None:
        return f"{base}?{urlencode({'link': str(link.pk if link is not None else link_id)})}"
    if ref is not None:
        return f"{base}?{urlencode({'ref': ref})}"
    return base


def _tile(attachment: Attachment) -> dict[str, Any]:
    kind = "thumbnail" if attachment.has_thumbnail else ("poster" if attachment.has_poster else None)  # type: ignore[attr-defined]
    metadata = attachment.metadata or {}
    duration = metadata.get("duration_seconds")
    size = attachment.size if attachment.size is not None else attachment.declared_size
    return {
        "pk": str(attachment.pk),
        "filename": attachment.filename,
        "preview": reverse(f"admin:attachments_attachment_{kind}", args=[attachment.pk]) if kind else "",
        "video": attachment.content_type.startswith("video/") or kind == "poster",
        "duration": format_duration(float(duration)) if isinstance(duration, (int, float)) else "",
        "size": filesizeformat(size) if size is not None else "",
        "status": attachment.status,
        "subject": attachment.subject,
        "tenant": attachment.tenant.slug,
        "change": reverse("admin:attachments_attachment_change", args=[attachment.pk]),
    }


def _context(request: HttpRequest, modeladmin: admin.ModelAdmin, **extra: Any) -> dict[str, Any]:
    return {
        **modeladmin.admin_site.each_context(request),
        "opts": modeladmin.model._meta,
        "can_decide": request.user.has_perm(MODERATE_PERMISSION),
        **extra,
    }


def approval_queue(modeladmin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """GET: the queues waiting, or one queue's grid. POST: approve, or decline after a confirmation."""
    if not request.user.has_perm(VIEW_PERMISSION):
        raise PermissionDenied
    link, ref = _queue_target(request)
    if link is None and ref is None:
        if request.method == "POST":
            raise Http404("no queue named")
        return _index(modeladmin, request)
    if request.method == "POST":
        return _post(modeladmin, request, link=link, ref=ref)
    files = queue_files(request.user, link=link, ref=ref)
    page = Paginator(files, PAGE_SIZE).get_page(request.GET.get("p"))
    query: dict[str, str] = {"link": str(link.pk)} if link is not None else {"ref": ref or ""}
    context = _context(
        request,
        modeladmin,
        title=f"Approval queue — {link.title or link.ref}" if link is not None else f"Approval queue — ref {ref}",
        link=link,
        ref=link.ref if link is not None else ref,
        page=page,
        tiles=[_tile(a) for a in page.object_list],
        waiting=page.paginator.count,
        ref_queue=queue_url(ref=link.ref) if link is not None else "",
    )
    context["pages"] = [(n, urlencode({**query, "p": str(n)})) for n in page.paginator.page_range]
    return TemplateResponse(request, "admin/attachments/approval_queue.html", context)


def _index(modeladmin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    links = list(waiting_links(request.user)[:200])
    refs: dict[tuple[str, str], int] = defaultdict(int)
    for link in links:
        refs[(link.tenant.slug, link.ref)] += link.waiting  # type: ignore[attr-defined]
    context = _context(
        request,
        modeladmin,
        title="Approval queues",
        links=[(link, queue_url(link=link)) for link in links],
        refs=[(tenant, r, n, queue_url(ref=r)) for (tenant, r), n in sorted(refs.items())],
    )
    return TemplateResponse(request, "admin/attachments/approval_index.html", context)


def _post(
    modeladmin: admin.ModelAdmin, request: HttpRequest, *, link: UploadLink | None, ref: str | None
) -> HttpResponse:
    if not request.user.has_perm(MODERATE_PERMISSION):
        raise PermissionDenied
    back = queue_url(link=link, ref=ref)
    decision = DECISIONS.get(request.POST.get("decision", ""))
    raw_ids = request.POST.getlist("ids")
    if decision is None or not raw_ids:
        problem = "Choose Approve or Decline." if decision is None else "Select at least one file first."
        messages.warning(request, problem)
        return HttpResponseRedirect(back)
    wanted, _bad = parse_ids(dict.fromkeys(raw_ids[: PAGE_SIZE * 2]))
    # Only files this staff member may see; the service changes those still waiting, and says which.
    visible = list(
        scoped(Attachment.objects.filter(pk__in=wanted), request.user)
        .select_related("owner", "tenant")
        .order_by("created_at", "pk")
    )
    asked = len(set(raw_ids))
    if len(visible) != asked:
        # A selection naming files out of reach (another tenant's, a crafted POST) is refused whole,
        # so nobody believes more was done than was.
        messages.error(
            request,
            f"{asked - len(visible)} selected file(s) are not yours to moderate: nothing was done.",
        )
        return HttpResponseRedirect(back)
    if decision.verb == "decline" and request.POST.get("confirm") != "yes":
        context = _context(
            request,
            modeladmin,
            title=f"Decline {len(visible)} file{'s' if len(visible) != 1 else ''}?",
            tiles=[_tile(a) for a in queue_files(request.user).filter(pk__in=[a.pk for a in visible])],
            link=link,
            ref=ref,
            back=back,
        )
        return TemplateResponse(request, "admin/attachments/approval_decline.html", context)
    try:
        changed = decide(request, decision, visible)
    except AirlockError as exc:
        messages.error(request, f"{decision.label} refused: {error_text(exc)}")
        return HttpResponseRedirect(back)
    if changed:
        messages.success(request, f"{decision.done.capitalize()} {len(changed)} file(s).")
    left = len(visible) - len(changed)
    if left:
        messages.warning(request, f"{left} file(s) were no longer waiting (decided already): left as they were.")
    return HttpResponseRedirect(back)


# --- upload links ----------------------------------------------------------------------


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
        return with_waiting_count(scoped(super().get_queryset(request), request.user))

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
            queue_url(link=link),
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
