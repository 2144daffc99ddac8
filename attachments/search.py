"""Full-text search over extracted document text the caller may read.

A member finds the tenant's ready documents; a request confined to a subject
(the `Airlock-Subject` header) finds only that subject's, as every other read
of a confined request does.

PostgreSQL: to_tsvector('simple', text) with a GIN expression index and
ts_headline for the snippet (selection markers set to nothing: plain text).
SQLite (embedded default): a LIKE scan, fine at that scale.
"""

from __future__ import annotations

import re

from django.db import connection
from django.db.models import F, Func, Q, TextField, Value
from django.utils import timezone

from .models import Attachment, Lifecycle, Status
from .subjects import confined_subject, owned_q
from .tenancy import tenant_of

MAX_RESULTS = 50
_SPACE = re.compile(r"\s+")
_HEADLINE_OPTIONS = 'StartSel="", StopSel="", MaxWords=35, MinWords=15, ShortWord=2, MaxFragments=1'


def _readable(user):
    now = timezone.now()
    qs = (
        Attachment.objects.filter(tenant=tenant_of(user), status=Status.READY)
        .exclude(lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.RELEASED, Lifecycle.DELETED])
        .filter(Q(lifecycle=Lifecycle.COMMITTED) | Q(expires_at__gt=now))
        .exclude(text="")
    )
    if confined_subject(user) is not None:
        qs = qs.filter(owned_q(user))
    return qs


def _plain(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def search_documents(*, user, query: str) -> list[dict]:
    query = query.strip()[:200]
    if not query:
        return []
    qs = _readable(user)
    if connection.vendor == "postgresql":
        from django.contrib.postgres.search import SearchQuery, SearchVector

        vector = SearchVector("text", config="simple")
        search = SearchQuery(query, config="simple", search_type="websearch")
        rows = (
            qs.annotate(document=vector)
            .filter(document=search)
            .annotate(
                snippet=Func(
                    Value("simple"),
                    F("text"),
                    search,
                    Value(_HEADLINE_OPTIONS),
                    function="ts_headline",
                    output_field=TextField(),
                )
            )
            .order_by("-ready_at")
            .values("id", "filename", "snippet")[:MAX_RESULTS]
        )
        return [{"id": str(r["id"]), "filename": r["filename"], "snippet": _plain(r["snippet"])} for r in rows]
    terms = [t for t in _SPACE.split(query) if t][:8]
    for term in terms:
        qs = qs.filter(text__icontains=term)
    results = []
    for row in qs.order_by("-ready_at").values("id", "filename", "text")[:MAX_RESULTS]:
        text = row["text"]
        at = text.lower().find(terms[0].lower()) if terms else 0
        start = max(0, at - 80)
        results.append(
            {"id": str(row["id"]), "filename": row["filename"], "snippet": _plain(text[start : start + 240])}
        )
    return results
