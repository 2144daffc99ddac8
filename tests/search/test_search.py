"""GET /api/v1/search: extracted PDF text, plain-text snippets, only what the caller may read."""

import pytest
from django.db import connection

from attachments.services.lifecycle import attachment_discard
from tests.subjects.support import as_subject
from tests.support import pdf_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db


def _doc(client, text, name="doc.pdf"):
    attachment_id = upload(client, pdf_bytes(text), profile="document", filename=name, content_type="application/pdf")
    assert run_pipeline(attachment_id) == "ready"
    return attachment_id


def test_search_finds_extracted_text_with_plain_snippets(alice, bob, mallory, api):
    mine = _doc(api(alice), "quarterly zebra report <b>bold</b> &amp; more")
    _doc(api(alice), "nothing to see here")
    found = api(bob).get("/api/v1/search?q=zebra").json()["results"]
    assert [r["id"] for r in found] == [mine]
    snippet = found[0]["snippet"]
    assert "zebra" in snippet and "<mark>" not in snippet and "&lt;" not in snippet
    assert found[0]["filename"] == "doc.pdf"
    assert api(mallory).get("/api/v1/search?q=zebra").json()["results"] == []


def _found(client, q):
    response = client.get(f"/api/v1/search?q={q}")
    assert response.status_code == 200, response.content
    return sorted(r["id"] for r in response.json()["results"])


def test_a_request_confined_to_a_subject_finds_only_that_subjects_documents(alice, bob):
    """One service token for many people: each person's search reaches their documents only."""
    ann = _doc(as_subject(alice, "ann"), "walnut invoice for ann")
    ben = _doc(as_subject(alice, "ben"), "walnut invoice for ben")
    own = _doc(as_subject(alice, None), "walnut invoice of the account")
    # bob's file has the same subject id: confinement is to the caller's own (account, subject)
    bobs_ann = _doc(as_subject(bob, "ann"), "walnut invoice by bob")
    assert _found(as_subject(alice, "ann"), "walnut") == [ann]
    assert _found(as_subject(alice, "ben"), "walnut") == [ben]
    assert _found(as_subject(alice, "carl"), "walnut") == []
    assert _found(as_subject(bob, "ann"), "walnut") == [bobs_ann]
    # unconfined: the tenant's ready documents, as before
    assert _found(as_subject(alice, None), "walnut") == sorted([ann, ben, own, bobs_ann])


def test_a_client_token_cannot_search(alice):
    from rest_framework.test import APIClient

    from attachments.client_tokens.services.client_tokens import client_token_issue

    _doc(as_subject(alice, "ann"), "walnut invoice for ann")
    key = client_token_issue(user=alice, subject="ann", ttl_seconds=600).key
    device = APIClient()
    device.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    response = device.get("/api/v1/search?q=walnut")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "CLIENT_TOKEN_SCOPE"


def test_discarded_documents_are_not_found(alice, api):
    attachment_id = _doc(api(alice), "unicorn memo")
    attachment_discard(user=alice, attachment_id=attachment_id)
    assert api(alice).get("/api/v1/search?q=unicorn").json()["results"] == []


def test_query_is_required(alice, api):
    response = api(alice).get("/api/v1/search")
    assert response.status_code == 400 and response.json()["error"]["code"] == "VALIDATION_ERROR"


def test_results_are_capped_at_50(alice, api):
    client = api(alice)
    for i in range(52):
        _doc(client, f"walrus {i}")
    assert len(client.get("/api/v1/search?q=walrus").json()["results"]) == 50


@pytest.mark.postgres
def test_postgres_uses_the_gin_index(alice, api):
    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'attachments_text_fts'")
        (definition,) = cursor.fetchone()
    assert "gin" in definition.lower() and "to_tsvector" in definition
