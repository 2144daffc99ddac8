"""The list hides removed files unless asked, filters by ref and subject, and refuses what it does not know.

Every reading endpoint declares its query parameters (attachments/api/query.py):
an unknown one, or a bad value, is 400 VALIDATION_ERROR naming it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.utils import timezone

from attachments import signing
from attachments.api.query import DeclaredQuery
from attachments.models import Attachment, Lifecycle
from attachments.retention.services.release import attachments_release
from attachments.services.lifecycle import attachment_discard, attachments_commit
from tests.support import client_for, create_intent, jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db


def _ids(response) -> set[str]:
    assert response.status_code == 200, response.content
    return {r["id"] for r in response.json()["results"]}


def _for(user, subject: str | None = None):
    client = client_for(user)
    if subject is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {user.api_token}", HTTP_AIRLOCK_SUBJECT=subject)
    return client


def _error(response, status: int = 400) -> dict:
    assert response.status_code == status, response.content
    body = response.json()["error"]
    assert body["code"] == "VALIDATION_ERROR"
    return body["details"]


@pytest.fixture
def shelf(alice, api):
    """One of alice's files in each place of its life: name → id."""
    client = api(alice)
    files = {
        name: upload(client, jpeg_bytes(), filename=f"{name}.jpg")
        for name in (
            "staged",
            "committed",
            "discarded",
            "released",
            "released_past_grace",
            "deleted",
            "expired_draft",
            "pending",
        )
    }
    for name, pk in files.items():
        if name != "pending":
            assert run_pipeline(pk) == "ready"
    attachments_commit(owner=alice, ids=[files["committed"]], ref="listing:1")
    attachments_commit(owner=alice, ids=[files["released"], files["released_past_grace"]], ref="listing:2")
    attachments_release(user=alice, ids=[files["released"], files["released_past_grace"]])
    past = timezone.now() - timedelta(seconds=1)
    Attachment.objects.filter(pk=files["released_past_grace"]).update(expires_at=past)
    Attachment.objects.filter(pk=files["expired_draft"]).update(expires_at=past)
    attachment_discard(user=alice, attachment_id=files["discarded"])
    Attachment.objects.filter(pk=files["deleted"]).update(lifecycle=Lifecycle.DELETED)
    return files


REMOVED = {"discarded", "released_past_grace", "deleted"}


def test_the_list_hides_removed_files_unless_include_removed(alice, api, shelf):
    client = api(alice)
    shown = _ids(client.get("/api/v1/attachments"))
    assert shown == {pk for name, pk in shelf.items() if name not in REMOVED}
    everything = _ids(client.get("/api/v1/attachments?include=removed"))
    assert everything == set(shelf.values())
    by_id = {r["id"]: r for r in client.get("/api/v1/attachments?include=removed").json()["results"]}
    assert by_id[shelf["deleted"]]["lifecycle"] == "deleted" and by_id[shelf["deleted"]]["available"] is False
    # The same rule for a list of ids: a removed one is absent unless asked for.
    listed = ",".join(shelf.values())
    assert _ids(client.get(f"/api/v1/attachments?ids={listed}")) == shown
    assert _ids(client.get(f"/api/v1/attachments?ids={listed}&include=removed")) == everything
    # An empty parameter counts as absent, as for every filter.
    assert _ids(client.get("/api/v1/attachments?include=")) == shown


def test_the_removed_files_page_like_the_others(alice, api, shelf):
    client = api(alice)
    seen, url = [], "/api/v1/attachments?include=removed&limit=3"
    while url:
        page = client.get(url).json()
        seen += [r["id"] for r in page["results"]]
        url = page["next"]
        assert url is None or "include=removed" in url
    assert sorted(seen) == sorted(shelf.values()) and len(seen) == len(set(seen))


def test_ref_filters_the_list(alice, bob, api, shelf):
    client = api(alice)
    assert _ids(client.get("/api/v1/attachments?ref=listing:1")) == {shelf["committed"]}
    assert _ids(client.get("/api/v1/attachments?ref=listing:2")) == {shelf["released"]}
    assert _ids(client.get("/api/v1/attachments?ref=listing:2&include=removed")) == {
        shelf["released"],
        shelf["released_past_grace"],
    }
    assert _ids(client.get("/api/v1/attachments?ref=listing:9")) == set()
    assert _ids(api(bob).get("/api/v1/attachments?ref=listing:1")) == set()  # another owner's ref
    assert "ref" in _error(client.get("/api/v1/attachments?ref=" + "r" * 201))


def test_subject_filters_the_list(alice, bob):
    first = {create_intent(_for(alice, "guest-1")).json()["id"] for _ in range(2)}
    second = {create_intent(_for(alice, "guest-2")).json()["id"]}
    own = {create_intent(_for(alice)).json()["id"]}
    create_intent(_for(bob, "guest-1"))  # bob's guest-1 is not alice's
    host = _for(alice)  # the service token, acting for nobody in particular
    assert _ids(host.get("/api/v1/attachments")) == first | second | own
    assert _ids(host.get("/api/v1/attachments?subject=guest-1")) == first
    assert _ids(host.get("/api/v1/attachments?subject=alice")) == own
    assert _ids(host.get("/api/v1/attachments?subject=nobody")) == set()
    # A request confined to a subject lists that subject's files; asking for another lists nothing.
    assert _ids(_for(alice, "guest-1").get("/api/v1/attachments")) == first
    assert _ids(_for(alice, "guest-1").get("/api/v1/attachments?subject=guest-1")) == first
    assert _ids(_for(alice, "guest-1").get("/api/v1/attachments?subject=guest-2")) == set()
    assert "subject" in _error(host.get("/api/v1/attachments?subject=" + "s" * 129))
    assert "subject" in _error(host.get("/api/v1/attachments", {"subject": " padded"}))


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("refs=listing:1", "refs"),  # a typo must not list everything
        ("status=ready&colour=red", "colour"),
        ("include=deleted", "include"),
        ("include=removed,all", "include"),
        ("status=done", "status"),
        ("committed=yes", "committed"),
        ("limit=ten", "limit"),
        ("cursor=not-a-cursor", "cursor"),
        ("profile=nope", "profile"),
        ("ids=1,2", "ids"),
        ("wait=5", "wait"),
    ],
)
def test_an_unknown_parameter_or_a_bad_value_is_named(alice, api, query, named):
    details = _error(api(alice).get(f"/api/v1/attachments?{query}"))
    assert named in details, details


def test_every_unknown_parameter_is_named_at_once(alice, api):
    details = _error(api(alice).get("/api/v1/attachments?b=1&a=2&status=ready"))
    assert details == {"a": ["Unknown query parameter."], "b": ["Unknown query parameter."]}


def test_every_reading_endpoint_refuses_an_unknown_parameter(alice, api):
    client = api(alice)
    pk = upload(client, jpeg_bytes((800, 600)))
    assert run_pipeline(pk) == "ready"
    row = Attachment.objects.get(pk=pk)
    base = f"/api/v1/attachments/{pk}"
    reads = [
        "/api/v1/profiles",
        "/api/v1/usage",
        "/api/v1/search?q=cat",
        "/api/v1/attachments",
        base,
        f"{base}?wait=0",
        f"{base}/download",
        f"{base}/thumbnail",
        f"{base}/variants/small",
    ]
    for path in reads:
        assert client.get(path, HTTP_ACCEPT="image/webp,*/*").status_code == 200, path
        joiner = "&" if "?" in path else "?"
        details = _error(client.get(f"{path}{joiner}utm_source=x", HTTP_ACCEPT="image/webp,*/*"))
        assert details == {"utm_source": ["Unknown query parameter."]}, path
    # The signed-link parameters stay allowed where they are used, with or without a header.
    query = signing.delivery_query(
        tenant_id=row.tenant_id, attachment_id=pk, name="download", exp=signing.delivery_expiry()
    )
    assert client.get(f"{base}/download?{query}").status_code == 200
    assert "exp" in _error(client.get(f"{base}?exp=1"))  # not on the resource: it is no signed read


def test_an_anonymous_request_learns_401_before_its_parameters_are_judged(alice):
    response = Client().get("/api/v1/attachments?colour=red")
    assert response.status_code == 401 and response.json()["error"]["code"] == "NOT_AUTHENTICATED"


def _api_views():
    """Every view class the API's URLs route to: in attachments/api/ and in a concern's api module
    (attachments/variants/api.py)."""

    def walk(patterns):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns)
            elif isinstance(pattern, URLPattern) and hasattr(pattern.callback, "view_class"):
                yield pattern.callback.view_class

    def in_the_api(module: str) -> bool:
        app, *rest = module.split(".")
        return app == "attachments" and "api" in rest

    return {view for view in walk(get_resolver().url_patterns) if in_the_api(view.__module__)}


def test_every_api_view_that_reads_declares_its_query_parameters():
    readers = {view for view in _api_views() if hasattr(view, "get")}
    assert "AttachmentVariantApi" in {view.__name__ for view in readers}, "a concern's api.py is the API's too"
    undeclared = sorted(view.__name__ for view in readers if not issubclass(view, DeclaredQuery))
    assert undeclared == []


def test_what_each_view_takes_is_what_its_schema_documents(client):
    schema = client.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    views = {view.__name__: view for view in _api_views()}
    documented: dict[str, set[str]] = {}
    for path, operations in schema["paths"].items():
        get = operations.get("get")
        if get is None or not path.startswith("/api/v1/"):
            continue
        documented[path] = {p["name"] for p in get.get("parameters", []) if p["in"] == "query"}
    assert len(documented) >= 9, documented  # profiles, usage, search, list, one, and the file reads
    for path, names in documented.items():
        concrete = path
        for name, value in {
            "attachment_id": "0" * 8 + "-0000-0000-0000-" + "0" * 12,
            "name": "small",
            "ref": "ad:1",
        }.items():
            concrete = concrete.replace("{" + name + "}", value)
        concrete = concrete.replace("{link_id}", "00000000-0000-4000-8000-000000000000")
        view = resolve(concrete).func.view_class
        assert view.__name__ in views, path
        assert names == set(view.query_parameters), (path, names, view.query_parameters)
