"""Finding a file in the console (#32 item 1): search by ref and more, date filters, size and preview columns,
"same ref" links and saved questions."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.models import Attachment, DeadLetter, Lifecycle, Status
from tests.support import client_for, create_intent, jpeg_bytes, make_staff, run_pipeline, upload

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/attachments/attachment/"


def _rows(response) -> list[str]:
    """The filenames listed on a changelist page, in order."""
    assert response.status_code == 200, response.content[:500]
    return re.findall(r'<th class="field-filename"><a [^>]*>([^<]+)</a>', response.content.decode())


@pytest.fixture
def wedding(alice, mallory):
    """Three files of acme with refs (two of one wedding), one of another tenant."""
    made = {}
    for width, (name, ref) in enumerate(
        (
            ("smith-1.jpg", "wedding:smith-2026"),
            ("smith-2.jpg", "wedding:smith-2026"),
            ("jones.jpg", "wedding:jones-2025"),
            ("ad.jpg", "ad:42"),
        ),
        start=80,
    ):
        pk = upload(client_for(alice), jpeg_bytes((width, 60)), filename=name)  # four different digests
        assert run_pipeline(pk) == "ready"
        Attachment.objects.filter(pk=pk).update(ref=ref)
        made[name] = pk
    made["evil.jpg"] = upload(client_for(mallory), jpeg_bytes((80, 60)), filename="evil.jpg")
    return made


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("ref:wedding:smith-2026", {"smith-1.jpg", "smith-2.jpg"}),  # exact
        ("ref:wedding:smith", {"smith-1.jpg", "smith-2.jpg"}),  # prefix
        ("ref:wedding:", {"smith-1.jpg", "smith-2.jpg", "jones.jpg"}),
        ("wedding:jones", {"jones.jpg"}),  # a plain term matches ref prefixes
        ("ad:42", {"ad.jpg"}),
        ("smith-1", {"smith-1.jpg"}),  # filename
        ("mallory", {"evil.jpg"}),  # owner
        ("evil", {"evil.jpg"}),  # tenant slug (and filename)
        ("ref:nothing", set()),
    ],
)
def test_search_by_ref_owner_tenant_filename(browser_for, moderator, wedding, term, expected):
    assert set(_rows(browser_for(moderator).get(CHANGELIST, {"q": term}))) == expected


def test_search_by_tenant_slug_lists_that_tenants_files(browser_for, moderator, wedding):
    assert set(_rows(browser_for(moderator).get(CHANGELIST, {"q": "acme"}))) == {
        "smith-1.jpg",
        "smith-2.jpg",
        "jones.jpg",
        "ad.jpg",
    }


def test_search_by_id_and_digest(browser_for, moderator, wedding):
    client = browser_for(moderator)
    jones = Attachment.objects.get(pk=wedding["jones.jpg"])
    assert _rows(client.get(CHANGELIST, {"q": str(jones.pk)})) == ["jones.jpg"]
    assert jones.sha256
    assert set(_rows(client.get(CHANGELIST, {"q": jones.sha256.upper()}))) == {"jones.jpg"}


def test_tenant_moderator_search_stays_in_their_tenant(browser_for, make_user, wedding):
    from attachments.services.staff import moderator_group_ensure

    evil_mod = make_user("evil-mod", tenant="evil", staff=True)
    evil_mod.groups.add(moderator_group_ensure())
    assert _rows(browser_for(evil_mod).get(CHANGELIST, {"q": "ref:wedding:"})) == []


def test_size_and_lazy_gated_thumbnail_columns(browser_for, moderator, wedding):
    html = browser_for(moderator).get(CHANGELIST).content.decode()
    assert re.search(r'<td class="field-size_human">[\d.,]+\xa0(bytes|KB)</td>', html)
    thumb = reverse_thumbnail(wedding["smith-1.jpg"])
    assert re.search(rf'<img class="airlock-list-thumb" src="{thumb}" alt="thumbnail" loading="lazy"', html)
    # The column links the staff endpoint, which answers with the derivative.
    assert browser_for(moderator).get(thumb).status_code == 200


def reverse_thumbnail(pk) -> str:
    from django.urls import reverse

    return reverse("admin:attachments_attachment_thumbnail", args=[pk])


def _clone(pk, n: int) -> None:
    """n more rows like `pk` (with its thumbnail): the list's cost, not the pipeline's, is under test."""
    import uuid

    from attachments.models import Derivative

    original = Attachment.objects.get(pk=pk)
    thumb = Derivative.objects.get(attachment_id=pk, kind="thumbnail")
    copies = []
    for i in range(n):
        fields = {f.attname: getattr(original, f.attname) for f in Attachment._meta.concrete_fields}
        fields.update(id=uuid.uuid4(), filename=f"clone-{i}.jpg")
        for unique in ("storage_key", "served_key", "quarantine_key"):
            if fields[unique]:
                fields[unique] = f"{fields[unique]}-{fields['id']}"
        copies.append(Attachment(**fields))
    Attachment.objects.bulk_create(copies)
    Derivative.objects.bulk_create(
        [
            Derivative(
                **{
                    **{
                        f.attname: getattr(thumb, f.attname)
                        for f in Derivative._meta.concrete_fields
                        if f.attname != "id"
                    },
                    "attachment_id": copy.pk,
                    "storage_key": f"{thumb.storage_key}-{copy.pk}",
                }
            )
            for copy in copies
        ]
    )


def test_list_query_count_is_the_same_for_20_and_200_rows(browser_for, moderator, alice):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = browser_for(moderator)
    pk = upload(client_for(alice), jpeg_bytes((40, 30)), filename="first.jpg")
    assert run_pipeline(pk) == "ready"
    _clone(pk, 19)
    client.get(CHANGELIST)  # warm the session, content types and the banner's cache
    with CaptureQueriesContext(connection) as twenty:
        html = client.get(CHANGELIST).content.decode()
    assert len(_rows_of(html)) == 20 and html.count('class="airlock-list-thumb"') == 20
    _clone(pk, 180)
    with CaptureQueriesContext(connection) as two_hundred:
        html = client.get(CHANGELIST).content.decode()
    assert len(_rows_of(html)) == 50 and html.count('class="airlock-list-thumb"') == 50  # one page of 200
    assert len(two_hundred.captured_queries) == len(twenty.captured_queries)


def _rows_of(html: str) -> list[str]:
    return re.findall(r'<th class="field-filename"><a [^>]*>([^<]+)</a>', html)


def test_date_range_filters_on_created_and_ready(browser_for, moderator, wedding):
    client = browser_for(moderator)
    Attachment.objects.filter(pk=wedding["jones.jpg"]).update(created_at=timezone.now() - timedelta(days=60))
    html = client.get(CHANGELIST).content.decode()
    assert "By created at" in html or "By created" in html
    today = timezone.localdate()
    recent = _rows(
        client.get(
            CHANGELIST,
            {"created_at__gte": str(today - timedelta(days=6)), "created_at__lt": str(today + timedelta(days=1))},
        )
    )
    assert "jones.jpg" not in recent and "smith-1.jpg" in recent
    ready_today = _rows(
        client.get(CHANGELIST, {"ready_at__gte": str(today), "ready_at__lt": str(today + timedelta(days=1))})
    )
    assert "evil.jpg" not in ready_today and "ad.jpg" in ready_today  # evil.jpg was never processed


def test_change_page_links_to_files_with_the_same_ref(browser_for, moderator, wedding):
    client = browser_for(moderator)
    html = client.get(f"{CHANGELIST}{wedding['smith-1.jpg']}/change/").content.decode()
    link = re.search(r'<a class="airlock-same-ref" href="([^"]+)"', html)
    assert link, "no same-ref link"
    assert set(_rows(client.get(link.group(1).replace("&amp;", "&")))) == {"smith-1.jpg", "smith-2.jpg"}


def test_the_same_ref_link_stays_in_the_files_tenant(browser_for, moderator, make_user):
    """Platform staff see every tenant: another tenant's file under the same ref name is another ref's."""
    alice, gina = make_user("alice", tenant="acme"), make_user("gina", tenant="globex")
    mine = upload(client_for(alice), jpeg_bytes((64, 64)), filename="acme-ad.jpg")
    theirs = upload(client_for(gina), jpeg_bytes((64, 64)), filename="globex-ad.jpg")
    for pk in (mine, theirs):
        assert run_pipeline(pk) == "ready"
        Attachment.objects.filter(pk=pk).update(ref="ad:42", lifecycle=Lifecycle.COMMITTED)
    for staff in (moderator, make_staff("acme-mod")):  # platform staff, and the tenant's own moderator
        client = browser_for(staff)
        html = client.get(f"{CHANGELIST}{mine}/change/").content.decode()
        link = re.search(r'<a class="airlock-same-ref" href="([^"]+)"', html)
        assert link, "no same-ref link"
        assert set(_rows(client.get(link.group(1).replace("&amp;", "&")))) == {"acme-ad.jpg"}, staff


def test_saved_questions(browser_for, moderator, alice, wedding):
    client = browser_for(moderator)
    html = client.get(CHANGELIST).content.decode()
    for label in ("Stuck over 30 minutes", "Rejected today", "Waiting in dead letters"):
        assert label in html

    stuck = create_intent(client_for(alice), filename="stuck.jpg", size=10).json()["id"]
    Attachment.objects.filter(pk=stuck).update(
        status=Status.PENDING, uploaded_at=timezone.now() - timedelta(minutes=45)
    )
    fresh = create_intent(client_for(alice), filename="fresh.jpg", size=10).json()["id"]
    Attachment.objects.filter(pk=fresh).update(status=Status.PENDING, uploaded_at=timezone.now())
    assert _rows(client.get(CHANGELIST, {"question": "stuck"})) == ["stuck.jpg"]

    bad = upload(client_for(alice), b"MZ no picture" * 8, filename="bad.jpg")
    assert run_pipeline(bad) == "rejected"
    rejected = _rows(client.get(CHANGELIST, {"question": "rejected_today", "reason_code": "type_not_allowed"}))
    assert rejected == ["bad.jpg"]
    old = upload(client_for(alice), b"MZ an old refusal" * 8, filename="old.jpg")
    assert run_pipeline(old) == "rejected"
    from attachments.models import TransitionLog

    TransitionLog.objects.filter(attachment_id=old).update(created_at=timezone.now() - timedelta(days=2))
    Attachment.objects.filter(pk=old).update(updated_at=timezone.now())  # touched today, rejected before
    assert _rows(client.get(CHANGELIST, {"question": "rejected_today"})) == ["bad.jpg"]

    DeadLetter.objects.create(kind=DeadLetter.Kind.PROCESSING, attachment_id=wedding["ad.jpg"], last_error="x")
    DeadLetter.objects.create(
        kind=DeadLetter.Kind.PROCESSING, attachment_id=wedding["jones.jpg"], last_error="x", resolved_at=timezone.now()
    )
    assert _rows(client.get(CHANGELIST, {"question": "dead_letters"})) == ["ad.jpg"]
