"""The console shows and finds subjects: `subject:<id>` search, the owner column, the change page, tombstones."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from attachments.models import Attachment, Lifecycle, Tombstone
from attachments.services.hard_delete import attachments_hard_delete
from tests.support import make_staff
from tests.sweeper.support import make_attachment

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/attachments/attachment/"


def _rows(response) -> list[str]:
    assert response.status_code == 200, response.content[:500]
    return re.findall(r'<th class="field-filename"><a [^>]*>([^<]+)</a>', response.content.decode())


@pytest.fixture
def people(alice, mallory):
    now = timezone.now()
    made = {}
    for name, owner, subject in (
        ("ann-1.jpg", alice, "user-ann"),
        ("ann-2.jpg", alice, "user-ann"),
        ("annabel.jpg", alice, "user-annabel"),
        ("host.jpg", alice, "alice"),
        ("evil-ann.jpg", mallory, "user-ann"),
    ):
        made[name] = make_attachment(owner, created_at=now, files=False, subject=subject)
        Attachment.objects.filter(pk=made[name].pk).update(filename=name)
    return made


@pytest.fixture
def console():
    client = Client()
    client.force_login(make_staff("acme-mod"))
    return client


def test_subject_search_is_exact_and_stays_in_the_moderators_tenant(console, people):
    assert set(_rows(console.get(CHANGELIST, {"q": "subject:user-ann"}))) == {"ann-1.jpg", "ann-2.jpg"}
    assert set(_rows(console.get(CHANGELIST, {"q": "subject:user-annabel"}))) == {"annabel.jpg"}
    assert _rows(console.get(CHANGELIST, {"q": "subject:user-a"})) == []
    assert set(_rows(console.get(CHANGELIST, {"q": "user-ann"}))) == {"ann-1.jpg", "ann-2.jpg"}  # a bare id too


def test_the_owner_column_shows_the_subject_under_the_owner(console, people):
    html = console.get(CHANGELIST).content.decode()
    assert re.search(r'alice<br><span class="airlock-subject" title="subject">for user-ann</span>', html)
    # A file the account made for itself shows no subject line.
    host_cell = re.search(r'host\.jpg</a></th>.*?<td class="field-owner_tenant">(.*?)</td>', html, re.S)
    assert host_cell is not None and "airlock-subject" not in host_cell.group(1)


def test_the_change_page_shows_the_subject(console, people):
    page = console.get(f"{CHANGELIST}{people['ann-1.jpg'].pk}/change/").content.decode()
    assert re.search(r"<label>Subject:</label>\s*<div class=\"readonly\">user-ann</div>", page), page[:200]


def test_the_tombstone_keeps_the_subject(alice):
    row = make_attachment(
        alice, files=False, lifecycle=Lifecycle.DELETED, deleted_at=timezone.now(), subject="user-ann"
    )
    assert attachments_hard_delete(
        rows=Attachment.objects.filter(pk=row.pk), actor="system:purge", now=timezone.now() + timedelta(days=1)
    )
    assert Tombstone.objects.get(attachment_id=row.pk).subject == "user-ann"
