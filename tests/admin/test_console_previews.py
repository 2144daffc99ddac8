"""A PDF's first pages and an archive's listing on the change page (#32 See).

The pages are made on first view by the sandbox's `variant` job and stored as
derivatives (made once); the listing is what the archive step recorded at processing.
"""

from __future__ import annotations

import io
import re

import pytest
from PIL import Image

from attachments.models import Attachment, Derivative
from attachments.variants.services import obtain as variants
from attachments.variants.spec import page_kind
from tests.support import client_for, jpeg_bytes, pdf_bytes, run_pipeline, upload, zip_bytes

pytestmark = pytest.mark.django_db

CHANGE = "/admin/attachments/attachment/{}/change/"


def _ready(alice, data, **kwargs) -> str:
    pk = upload(client_for(alice), data, **kwargs)
    assert run_pipeline(pk) == "ready"
    return pk


def test_an_archive_lists_its_recorded_names_and_sizes(browser_for, moderator, alice):
    entries = {"photos/IMG_0001.jpg": b"x" * 2048, "notes <b>bold</b>.txt": b"hello", "empty/": b""}
    pk = _ready(alice, zip_bytes(entries), profile="archive", filename="album.zip", content_type="application/zip")
    listing = Attachment.objects.get(pk=pk).metadata["listing"]
    assert listing == [["photos/IMG_0001.jpg", 2048], ["notes <b>bold</b>.txt", 5], ["empty/", 0]]
    html = browser_for(moderator).get(CHANGE.format(pk)).content.decode()
    section = re.search(r'<section class="airlock-archive module" id="airlock-archive".*?</section>', html, re.S)
    assert section, "no archive listing"
    text = section.group(0)
    assert "3 entries" in text
    assert '<td class="airlock-archive-name">photos/IMG_0001.jpg</td><td>2.0\xa0KB</td>' in text
    assert "notes &lt;b&gt;bold&lt;/b&gt;.txt" in text and "<b>bold</b>" not in text  # a name is data
    assert "<th>listing</th>" not in html  # not repeated as a raw row in the facts table


def test_a_pdf_shows_its_first_three_pages_made_once(browser_for, moderator, alice):
    pk = _ready(alice, pdf_bytes(pages=5), profile="document", filename="contract.pdf", content_type="application/pdf")
    client = browser_for(moderator)
    html = client.get(CHANGE.format(pk)).content.decode()
    urls = re.findall(r'<img src="([^"]+)" alt="page (\d)" loading="lazy">', html)
    assert [n for _, n in urls] == ["1", "2", "3"]
    assert "page 3 of 5" in html
    response = client.get(urls[1][0])
    assert response.status_code == 200 and response["Content-Type"] == "image/webp"
    image = Image.open(io.BytesIO(b"".join(response.streaming_content)))
    assert max(image.size) == variants.CONSOLE_PAGE_SIZE
    assert client.get(urls[1][0]).status_code == 200
    assert Derivative.objects.filter(attachment_id=pk, kind=page_kind(2)).count() == 1
    assert not Derivative.objects.filter(attachment_id=pk, kind=page_kind(1)).exists()  # nothing before it is viewed
    assert client.get(f"/admin/attachments/attachment/{pk}/page/4/").status_code == 404  # past the first three


def test_page_previews_are_for_pdfs_staff_may_see(browser_for, moderator, alice, mallory):
    photo = _ready(alice, jpeg_bytes((50, 40)))
    client = browser_for(moderator)
    assert 'id="airlock-pages"' not in client.get(CHANGE.format(photo)).content.decode()
    assert client.get(f"/admin/attachments/attachment/{photo}/page/1/").status_code == 404
    short = _ready(alice, pdf_bytes(pages=1), profile="document", filename="one.pdf", content_type="application/pdf")
    html = client.get(CHANGE.format(short)).content.decode()
    assert len(re.findall(r'alt="page \d"', html)) == 1
    Attachment.objects.filter(pk=short).update(status="processing")  # not served: nothing to preview
    assert client.get(f"/admin/attachments/attachment/{short}/page/1/").status_code == 404
