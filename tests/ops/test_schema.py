"""The OpenAPI document at /api/v1/schema matches API.md, and real responses match the document."""

from __future__ import annotations

import copy
import json

import pytest
from openapi_schema_validator import OAS30Validator

from tests.support import client_for, create_intent, jpeg_bytes, pdf_bytes, run_pipeline, upload

# (path, method) → success status and its response component (None: no JSON body).
OPERATIONS = {
    ("/api/v1/profiles", "get"): ("200", "Profiles"),
    ("/api/v1/uploads", "post"): ("201", "IntentResponse"),
    ("/api/v1/uploads/{attachment_id}/content", "put"): ("202", "Attachment"),
    ("/api/v1/uploads/{attachment_id}/complete", "post"): ("202", "Attachment"),
    ("/api/v1/uploads/{attachment_id}/parts", "post"): ("200", "PartsResponse"),
    ("/api/v1/attachments", "post"): ("202", "Attachment"),
    ("/api/v1/attachments", "get"): ("200", "AttachmentList"),
    ("/api/v1/attachments/{attachment_id}", "get"): ("200", "Attachment"),
    ("/api/v1/attachments/{attachment_id}/download", "get"): ("200", None),
    ("/api/v1/attachments/{attachment_id}/thumbnail", "get"): ("200", None),
    ("/api/v1/attachments/{attachment_id}/display", "get"): ("200", None),
    ("/api/v1/attachments/{attachment_id}/poster", "get"): ("200", None),
    ("/api/v1/attachments/{attachment_id}/variants/{name}", "get"): ("200", None),
    ("/api/v1/attachments/heartbeat", "post"): ("200", "HeartbeatResponse"),
    ("/api/v1/attachments/{attachment_id}/discard", "post"): ("204", None),
    ("/api/v1/attachments/discard-all", "post"): ("200", "DiscardAllResponse"),
    ("/api/v1/attachments/commit", "post"): ("200", "CommitResponse"),
    ("/api/v1/attachments/release", "post"): ("200", "ReleaseResponse"),
    ("/api/v1/attachments/{attachment_id}", "delete"): ("204", None),
    ("/api/v1/attachments/{attachment_id}/restore", "post"): ("204", None),
    ("/api/v1/search", "get"): ("200", "SearchResponse"),
    ("/api/v1/storage-events", "post"): ("202", "StorageEventsAccepted"),
    ("/api/v1/usage", "get"): ("200", "Usage"),
    ("/api/v1/client-tokens", "post"): ("201", "ClientToken"),
    ("/api/v1/client-tokens/{token_id}", "delete"): ("204", None),
    ("/api/v1/subjects/logout", "post"): ("200", "SubjectLogoutResponse"),
    ("/api/v1/subjects/erase", "post"): ("200", "SubjectErasure"),
    ("/api/v1/attachments/{attachment_id}/web", "get"): ("200", None),
    ("/api/v1/attachments/approve", "post"): ("200", "ApproveResponse"),
    ("/api/v1/attachments/decline", "post"): ("200", "DeclineResponse"),
    ("/api/v1/guest-uploads/{attachment_id}", "delete"): ("204", None),
    ("/api/v1/refs/{ref}/archive", "get"): ("200", None),
    ("/api/v1/refs/{ref}/archive-link", "get"): ("200", "ArchiveLink"),
    ("/api/v1/upload-links", "get"): ("200", "UploadLinkList"),
    ("/api/v1/upload-links", "post"): ("201", "UploadLink"),
    ("/api/v1/upload-links/{link_id}", "get"): ("200", "UploadLink"),
    ("/api/v1/upload-links/{link_id}", "delete"): ("204", None),
}

# Error statuses each operation must document (API.md's table applied per operation).
ERRORS = {
    ("/api/v1/client-tokens", "post"): {400, 401, 403},
    ("/api/v1/client-tokens/{token_id}", "delete"): {401, 403, 404},
    ("/api/v1/subjects/logout", "post"): {400, 401, 403},
    ("/api/v1/profiles", "get"): {401},
    ("/api/v1/uploads", "post"): {400, 401, 413, 429},
    ("/api/v1/uploads/{attachment_id}/content", "put"): {403, 409, 413},
    ("/api/v1/uploads/{attachment_id}/complete", "post"): {401, 404},
    ("/api/v1/uploads/{attachment_id}/parts", "post"): {401, 404, 409},
    ("/api/v1/attachments", "post"): {400, 401, 413, 429},
    ("/api/v1/attachments", "get"): {400, 401},
    ("/api/v1/attachments/{attachment_id}", "get"): {401, 404},
    ("/api/v1/attachments/{attachment_id}/download", "get"): {401, 404},
    ("/api/v1/attachments/{attachment_id}/thumbnail", "get"): {401, 404},
    ("/api/v1/attachments/{attachment_id}/display", "get"): {401, 404},
    ("/api/v1/attachments/{attachment_id}/poster", "get"): {401, 404},
    ("/api/v1/attachments/{attachment_id}/variants/{name}", "get"): {401, 403, 404, 503},
    ("/api/v1/attachments/heartbeat", "post"): {400, 401, 413},
    ("/api/v1/attachments/{attachment_id}/discard", "post"): {401, 404, 409},
    ("/api/v1/attachments/discard-all", "post"): {401},
    ("/api/v1/attachments/commit", "post"): {400, 401, 413, 422},
    ("/api/v1/attachments/release", "post"): {400, 401, 413, 422},
    ("/api/v1/attachments/{attachment_id}", "delete"): {401, 404},
    ("/api/v1/attachments/{attachment_id}/restore", "post"): {401, 404, 409},
    ("/api/v1/search", "get"): {400, 401},
    ("/api/v1/storage-events", "post"): {400, 401, 413},
    ("/api/v1/usage", "get"): {401},
    ("/api/v1/subjects/erase", "post"): {400, 401, 404, 413},
    ("/api/v1/attachments/{attachment_id}/web", "get"): {401, 404, 409},
    ("/api/v1/attachments/approve", "post"): {400, 401, 403},
    ("/api/v1/attachments/decline", "post"): {400, 401, 403},
    ("/api/v1/guest-uploads/{attachment_id}", "delete"): {401, 404, 409},
    ("/api/v1/refs/{ref}/archive", "get"): {401, 403, 404},
    ("/api/v1/refs/{ref}/archive-link", "get"): {401, 403, 404},
    ("/api/v1/upload-links", "get"): {401, 403},
    ("/api/v1/upload-links", "post"): {400, 401, 403, 413},
    ("/api/v1/upload-links/{link_id}", "get"): {401, 403, 404},
    ("/api/v1/upload-links/{link_id}", "delete"): {401, 403, 404},
}


@pytest.fixture(scope="module")
def document(django_db_blocker) -> dict:
    from rest_framework.test import APIClient

    with django_db_blocker.unblock():
        response = APIClient().get("/api/v1/schema", {"format": "json"})
    assert response.status_code == 200, response.content[:300]
    return json.loads(response.content)


def _resolve(node, components):
    if isinstance(node, dict):
        if "$ref" in node:
            return _resolve(copy.deepcopy(components[node["$ref"].rsplit("/", 1)[1]]), components)
        return {k: _resolve(v, components) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve(v, components) for v in node]
    return node


def conforms(document: dict, component: str, instance) -> None:
    schema = _resolve({"$ref": f"#/components/schemas/{component}"}, document["components"]["schemas"])
    OAS30Validator(schema).validate(instance)


def test_schema_is_public_and_valid_openapi(client, db):
    from openapi_spec_validator import validate

    response = client.get("/api/v1/schema", {"format": "json"})
    assert response.status_code == 200
    validate(json.loads(response.content))
    assert client.get("/api/v1/schema").status_code == 200  # YAML by default


def test_every_operation_of_the_contract_is_documented(document):
    documented = {
        (path, method)
        for path, ops in document["paths"].items()
        for method in ops
        if method in {"get", "post", "put", "patch", "delete"}
    }
    assert documented == set(OPERATIONS)


@pytest.mark.parametrize("path, method", sorted(OPERATIONS))
def test_each_operation_documents_success_and_errors(document, path, method):
    operation = document["paths"][path][method]
    status, component = OPERATIONS[(path, method)]
    responses = operation["responses"]
    assert status in responses
    if component:
        assert responses[status]["content"]["application/json"]["schema"] == {
            "$ref": f"#/components/schemas/{component}"
        }
    for code in ERRORS[(path, method)] | {503}:
        assert responses[str(code)]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Error"
        }, (path, method, code)
    if (
        method in ("post", "put")
        and path not in ("/api/v1/attachments/discard-all",)
        and not path.endswith(("/discard", "/restore", "/parts"))  # no body
    ):
        assert "requestBody" in operation, (path, method)
    assert operation.get("security"), (path, method)


def test_security_schemes(document):
    schemes = document["components"]["securitySchemes"]
    assert schemes["tokenAuth"] == {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": schemes["tokenAuth"]["description"],
    }
    assert "Token" in schemes["tokenAuth"]["description"]
    assert schemes["cookieAuth"]["in"] == "cookie"
    assert schemes["uploadToken"]["in"] == "query" and schemes["uploadToken"]["name"] == "token"
    assert schemes["storageEventsBearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schemes["storageEventsBearer"]["description"],
    }
    put = document["paths"]["/api/v1/uploads/{attachment_id}/content"]["put"]
    assert put["security"] == [{"uploadToken": []}]


def test_docs_page_is_served_without_a_cdn(client, db):
    response = client.get("/api/v1/docs")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html.lower()
    assert "/static/drf_spectacular_sidecar/" in html
    assert "cdn.jsdelivr" not in html and "unpkg.com" not in html
    from django.contrib.staticfiles import finders

    # Served by `manage.py serve` (StaticFilesHandler) or collectstatic + the proxy in production.
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")


def test_error_bodies_conform(document, alice, db):
    client = client_for(alice)
    conforms(document, "Error", client_for().get("/api/v1/attachments").json())
    conforms(document, "Error", client.get("/api/v1/attachments/nope").json())
    conforms(document, "Error", client.post("/api/v1/uploads", {"profile": 1}, format="json").json())
    conforms(
        document,
        "Error",
        client.post("/api/v1/attachments/commit", {"ids": ["x"], "ref": "r"}, format="json").json(),
    )


def test_real_responses_conform(document, alice, bob, settings):
    settings.CLAMD_SOCKET = None
    settings.CLAMD_HOST = None
    client = client_for(alice)
    conforms(document, "Profiles", client.get("/api/v1/profiles").json())
    conforms(document, "Usage", client.get("/api/v1/usage").json())
    intent = create_intent(client)
    conforms(document, "IntentResponse", intent.json())

    pending = client.get(f"/api/v1/attachments/{intent.json()['id']}").json()
    conforms(document, "Attachment", pending)

    image = upload(client, jpeg_bytes((300, 200)))
    assert run_pipeline(image) == "ready"
    ready = client.get(f"/api/v1/attachments/{image}").json()
    assert "thumbnail" in ready["links"]
    conforms(document, "Attachment", ready)
    conforms(document, "Attachment", client_for(bob).get(f"/api/v1/attachments/{image}").json())
    erased = client.post("/api/v1/subjects/erase", {"subject": "alice", "dry_run": True}, format="json")
    conforms(document, "SubjectErasure", erased.json())

    document_id = upload(
        client,
        pdf_bytes("searchable needle words"),
        profile="document",
        filename="d.pdf",
        content_type="application/pdf",
    )
    assert run_pipeline(document_id) == "ready"
    conforms(document, "Attachment", client.get(f"/api/v1/attachments/{document_id}").json())
    search = client.get("/api/v1/search", {"q": "needle"}).json()
    conforms(document, "SearchResponse", search)
    assert search["results"]

    rejected = upload(client, b"not an image at all", filename="x.jpg")
    assert run_pipeline(rejected) == "rejected"
    conforms(document, "Attachment", client.get(f"/api/v1/attachments/{rejected}").json())

    listing = client.get("/api/v1/attachments", {"limit": 2}).json()
    assert listing["next"]
    conforms(document, "AttachmentList", listing)
    conforms(
        document,
        "HeartbeatResponse",
        client.post("/api/v1/attachments/heartbeat", {"ids": [image, "missing"]}, format="json").json(),
    )
    committed = client.post("/api/v1/attachments/commit", {"ids": [image], "ref": "listing:1"}, format="json")
    conforms(document, "CommitResponse", committed.json())
    conforms(document, "Attachment", client.get(f"/api/v1/attachments/{image}").json())
    conforms(
        document,
        "HeartbeatResponse",
        client.post("/api/v1/attachments/heartbeat", {"ids": [image]}, format="json").json(),
    )
    conforms(
        document,
        "Attachment",
        client.post(f"/api/v1/uploads/{intent.json()['id']}/complete", {}, format="json").json(),
    )
    conforms(document, "DiscardAllResponse", client.post("/api/v1/attachments/discard-all").json())


def test_schema_generates_without_warnings(tmp_path, db):
    """A new view without documentation (or a broken annotation) fails here, not in production."""
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert (tmp_path / "schema.yaml").stat().st_size > 10_000


def test_error_responses_are_derived_from_the_error_classes():
    from attachments.api.schema import error_texts
    from attachments.errors import NotFound, QuotaExceeded, TooLarge, Unavailable

    texts = error_texts(NotFound, TooLarge, QuotaExceeded, TOO_LARGE="over the limit")
    assert sorted(texts) == [404, 413, 503]  # Unavailable always: any request can meet an outage
    assert texts[413] == f"`TOO_LARGE`: over the limit. `QUOTA_EXCEEDED`: {QuotaExceeded.default_message}"
    assert texts[503] == f"`UNAVAILABLE`: {Unavailable.default_message}"
    with pytest.raises(ValueError, match="RATE_LIMITED"):
        error_texts(NotFound, RATE_LIMITED="not raised here")
