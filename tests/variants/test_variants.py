"""Named variants: sizes, Accept negotiation, ETag/304, signed links, the gate, single flight, failure memory."""

from __future__ import annotations

import io
from urllib.parse import urlsplit

import pytest
from django.test import Client
from PIL import Image

from attachments import hooks
from attachments.models import Attachment, Derivative, VariantClaim
from attachments.services.moderation import attachment_take_down
from attachments.variants.services import obtain as variant_service
from tests.support import jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db

WEBP_ACCEPT = "image/avif,image/webp,image/apng,image/*,*/*;q=0.8"  # a browser's <img>


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def _varies_on_accept(response) -> bool:
    return "accept" in [v.strip().lower() for v in response.get("Vary", "").split(",")]


def _path(link: str) -> str:
    parts = urlsplit(link)
    return f"{parts.path}?{parts.query}"


def _ready(api, user, size=(3000, 2000), profile="image") -> str:
    attachment_id = upload(api(user), jpeg_bytes(size=size), profile=profile)
    assert run_pipeline(attachment_id) == "ready"
    return attachment_id


def _variant_links(api, user, attachment_id) -> dict[str, str]:
    response = api(user).get(f"/api/v1/attachments/{attachment_id}")
    assert response.status_code == 200, response.content
    return response.json()["links"]["variants"]


@pytest.mark.parametrize(
    ("original", "name", "expected"),
    [
        ((3000, 2000), "small", (640, 427)),
        ((3000, 2000), "medium", (1280, 853)),
        ((3000, 2000), "large", (2048, 1365)),
        ((800, 600), "large", (800, 600)),  # never upscaled
        ((800, 600), "small", (640, 480)),
    ],
)
def test_variant_sizes_fit_within_and_never_upscale(alice, api, original, name, expected):
    attachment_id = _ready(api, alice, size=original)
    got = api(alice).get(f"/api/v1/attachments/{attachment_id}/variants/{name}", HTTP_ACCEPT=WEBP_ACCEPT)
    assert got.status_code == 200, got.content
    with Image.open(io.BytesIO(_body(got))) as image:
        assert image.format == "WEBP" and image.size == expected
    made = Derivative.objects.get(attachment_id=attachment_id, kind=f"variant:{name}:webp")
    assert (made.width, made.height) == expected and "/derivatives/" in made.storage_key


def test_accept_negotiates_webp_or_jpeg_and_varies(alice, api):
    attachment_id = _ready(api, alice, size=(1000, 700))
    url = f"/api/v1/attachments/{attachment_id}/variants/small"
    webp = api(alice).get(url, HTTP_ACCEPT=WEBP_ACCEPT)
    jpeg = api(alice).get(url, HTTP_ACCEPT="image/jpeg,image/*;q=0.8")
    refused = api(alice).get(url, HTTP_ACCEPT="image/webp;q=0, */*")
    assert webp["Content-Type"] == "image/webp" and jpeg["Content-Type"] == "image/jpeg"
    assert refused["Content-Type"] == "image/jpeg"
    for response in (webp, jpeg, refused):
        assert response.status_code == 200 and _varies_on_accept(response)
        assert response["Cache-Control"] == "private, no-store"
    with Image.open(io.BytesIO(_body(jpeg))) as image:
        assert image.format == "JPEG" and image.size == (640, 448)
    assert webp["ETag"] != jpeg["ETag"]


def test_etag_is_stable_and_if_none_match_answers_304(alice, bob, api):
    attachment_id = _ready(api, alice, size=(1000, 700))
    url = f"/api/v1/attachments/{attachment_id}/variants/medium"
    first = api(alice).get(url, HTTP_ACCEPT=WEBP_ACCEPT)
    again = api(bob).get(url, HTTP_ACCEPT=WEBP_ACCEPT)  # same tenant, another reader, served warm
    assert first.status_code == again.status_code == 200 and first["ETag"] == again["ETag"]
    assert _body(first) == _body(again)
    assert Derivative.objects.filter(attachment_id=attachment_id, kind="variant:medium:webp").count() == 1
    not_modified = api(alice).get(url, HTTP_ACCEPT=WEBP_ACCEPT, HTTP_IF_NONE_MATCH=first["ETag"])
    assert not_modified.status_code == 304 and not_modified["ETag"] == first["ETag"]
    assert _varies_on_accept(not_modified) and not not_modified.content
    other = api(alice).get(url, HTTP_ACCEPT=WEBP_ACCEPT, HTTP_IF_NONE_MATCH='"v1-other"')
    assert other.status_code == 200


def test_signed_link_without_header_works_and_ranges(alice, api):
    attachment_id = _ready(api, alice)
    links = _variant_links(api, alice, attachment_id)
    assert set(links) == {"small", "medium", "large"}
    anonymous = Client()
    got = anonymous.get(_path(links["small"]), HTTP_ACCEPT=WEBP_ACCEPT)
    assert got.status_code == 200 and got["Content-Type"] == "image/webp"
    partial = anonymous.get(_path(links["small"]), HTTP_ACCEPT=WEBP_ACCEPT, HTTP_RANGE="bytes=0-9")
    assert partial.status_code == 206 and len(_body(partial)) == 10
    # A link signs one variant: its signature does not read another.
    swapped = _path(links["small"]).replace("/variants/small?", "/variants/large?")
    assert anonymous.get(swapped).status_code == 403
    assert anonymous.get(f"/api/v1/attachments/{attachment_id}/variants/small").status_code == 401


def test_variants_of_a_file_that_is_not_ready_are_never_served_even_signed(alice, api):
    ready_id = _ready(api, alice, size=(800, 600))
    signed = _variant_links(api, alice, ready_id)["small"]
    pending_id = upload(api(alice), jpeg_bytes(size=(800, 600)))
    assert "variants" not in api(alice).get(f"/api/v1/attachments/{pending_id}").json()["links"]
    # Nothing of a pending file is served, to its owner neither: told to wait, not that it does not exist.
    assert api(alice).get(f"/api/v1/attachments/{pending_id}/download").status_code == 409
    waiting = api(alice).get(f"/api/v1/attachments/{pending_id}/variants/small")
    assert waiting.status_code == 409 and waiting.json()["error"]["details"] == {"status": "pending"}
    attachment_take_down(attachment_id=ready_id, actor="staff:mod", note="abuse")
    assert Client().get(_path(signed), HTTP_ACCEPT=WEBP_ACCEPT).status_code == 404
    assert api(alice).get(f"/api/v1/attachments/{ready_id}/variants/small").status_code == 404
    Attachment.objects.filter(pk=pending_id).update(status="rejected", reason_code="corrupt")
    assert api(alice).get(f"/api/v1/attachments/{pending_id}/variants/small").status_code == 404
    assert not Derivative.objects.filter(kind__startswith="variant:").exists()


def test_unknown_variant_and_profile_without_variants_are_404(alice, api, settings):
    attachment_id = _ready(api, alice, size=(800, 600))
    assert api(alice).get(f"/api/v1/attachments/{attachment_id}/variants/huge").status_code == 404
    settings.AIRLOCK_VARIANTS = {}
    assert api(alice).get(f"/api/v1/attachments/{attachment_id}/variants/small").status_code == 404
    assert "variants" not in api(alice).get(f"/api/v1/attachments/{attachment_id}").json()["links"]


def test_a_failed_generation_is_remembered_and_counted(alice, api, monkeypatch):
    attachment_id = _ready(api, alice, size=(800, 600))
    calls = []

    def refusing(source, work_dir, size, fmt):
        calls.append(size)
        raise hooks.RenderFailed("corrupt: test")

    monkeypatch.setattr(hooks, "_variant_renderer", [refusing])
    failed = variant_service.GENERATIONS.labels(outcome="failed")
    before = failed._value.get()
    url = f"/api/v1/attachments/{attachment_id}/variants/small"
    first = api(alice).get(url, HTTP_ACCEPT=WEBP_ACCEPT)
    second = api(alice).get(url, HTTP_ACCEPT=WEBP_ACCEPT)
    for response in (first, second):
        assert response.status_code == 503 and response.json()["error"]["code"] == "VARIANT_FAILED"
        assert 50 <= int(response["Retry-After"]) <= 60
    assert calls == [640]  # the second request did not decode again
    assert failed._value.get() == before + 1
    assert VariantClaim.objects.get(attachment_id=attachment_id).failed


def test_a_sandbox_outage_is_503_and_releases_the_claim(alice, api, monkeypatch):
    attachment_id = _ready(api, alice, size=(800, 600))

    def down(source, work_dir, size, fmt):
        raise hooks.RenderUnavailable("test outage")

    monkeypatch.setattr(hooks, "_variant_renderer", [down])
    got = api(alice).get(f"/api/v1/attachments/{attachment_id}/variants/small", HTTP_ACCEPT=WEBP_ACCEPT)
    assert got.status_code == 503 and got["Retry-After"]
    assert not VariantClaim.objects.exists()


def test_waiters_give_up_with_503_while_another_request_makes_it(alice, api, monkeypatch):
    attachment_id = _ready(api, alice, size=(800, 600))
    monkeypatch.setattr(variant_service, "WAIT_SECONDS", 0.3)
    from django.utils import timezone

    # Another process holds the claim and is still within its time.
    Attachment.objects.get(pk=attachment_id)
    VariantClaim.objects.create(
        attachment_id=attachment_id, kind="variant:small:webp", until=timezone.now() + timezone.timedelta(seconds=60)
    )
    got = api(alice).get(f"/api/v1/attachments/{attachment_id}/variants/small", HTTP_ACCEPT=WEBP_ACCEPT)
    assert got.status_code == 503 and got.json()["error"]["code"] == "UNAVAILABLE" and got["Retry-After"]
    # A claim whose maker died (past its time) is taken over.
    VariantClaim.objects.update(until=timezone.now() - timezone.timedelta(seconds=1))
    again = api(alice).get(f"/api/v1/attachments/{attachment_id}/variants/small", HTTP_ACCEPT=WEBP_ACCEPT)
    assert again.status_code == 200 and not VariantClaim.objects.exists()


def test_the_sweep_deletes_variants_with_their_attachment(alice, api):
    from datetime import timedelta

    from django.utils import timezone

    from attachments.services.lifecycle import attachment_discard
    from attachments.storage import get_gateway
    from sweeper.sweep import sweep_expired

    attachment_id = _ready(api, alice, size=(800, 600))
    assert (
        api(alice).get(f"/api/v1/attachments/{attachment_id}/variants/small", HTTP_ACCEPT=WEBP_ACCEPT).status_code
        == 200
    )
    key = Derivative.objects.get(attachment_id=attachment_id, kind="variant:small:webp").storage_key
    assert get_gateway().head(key) is not None
    attachment_discard(user=alice, attachment_id=attachment_id)
    report = sweep_expired(now=timezone.now() + timedelta(minutes=1))
    assert report.deleted == 1
    assert get_gateway().head(key) is None


def test_a_claim_won_just_after_another_generation_finished_makes_nothing(alice, api, monkeypatch):
    # The race seen under serve on PostgreSQL: this request found no row, then the other
    # maker recorded it and dropped its claim, then this request's claim insert won.
    attachment_id = _ready(api, alice, size=(800, 600))
    url = f"/api/v1/attachments/{attachment_id}/variants/small"
    assert api(alice).get(url, HTTP_ACCEPT=WEBP_ACCEPT).status_code == 200
    made = Derivative.objects.get(attachment_id=attachment_id, kind="variant:small:webp")
    fields = {f: getattr(made, f) for f in ("kind", "storage_key", "content_type", "size", "width", "height")}
    made.delete()
    real_claim, renders = variant_service._claim, []

    def claim_as_the_other_maker_finishes(attachment, kind, now):
        won = real_claim(attachment, kind, now)
        Derivative.objects.create(attachment=attachment, **fields)
        return won

    def render(source, work_dir, size, fmt):
        renders.append(size)
        raise hooks.RenderFailed("must not run")

    monkeypatch.setattr(variant_service, "_claim", claim_as_the_other_maker_finishes)
    monkeypatch.setattr(hooks, "_variant_renderer", [render])
    got = api(alice).get(url, HTTP_ACCEPT=WEBP_ACCEPT)
    assert got.status_code == 200 and renders == []
    assert not VariantClaim.objects.exists()


def test_a_cold_variant_reads_the_stored_file_itself_when_storage_is_local(alice, api, monkeypatch):
    """Local storage: the sandbox is handed the served object's own file, not a copy made per request."""
    from attachments.storage import get_gateway

    attachment_id = _ready(api, alice, size=(3000, 2000))
    served_key = Attachment.objects.get(pk=attachment_id).served_key
    real, sources = hooks.variant_renderer(), []

    def render(source, work_dir, size, fmt):
        sources.append(source)
        return real(source, work_dir, size, fmt)

    monkeypatch.setattr(hooks, "_variant_renderer", [render])
    got = api(alice).get(f"/api/v1/attachments/{attachment_id}/variants/medium", HTTP_ACCEPT=WEBP_ACCEPT)
    assert got.status_code == 200, got.content
    with Image.open(io.BytesIO(_body(got))) as image:
        assert image.size == (1280, 853)
    local = get_gateway().local_path(served_key)
    if local is not None:  # the embedded default
        assert sources == [local]
    else:  # S3: a private copy in the scratch dir, as before
        assert len(sources) == 1 and sources[0].name == "source"
