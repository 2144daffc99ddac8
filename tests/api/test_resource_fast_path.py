"""The shared-serializer fast path (fastpath_serializer.SharedSerializer) answers exactly as DRF's per-request
serializers.

Validation and rendering go through one bound instance per class; these tests
pin that it validates and renders what a fresh instance would, that the hot
paths build no serializer per request, that the shared instances never hold
request state, and that concurrent renders do not see each other's values:
what the fast path leans on in DRF, so a DRF that changes it fails here.
"""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import rest_framework
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework import serializers

from attachments import signing
from attachments.api.fastpath_serializer import SharedSerializer, _shared
from attachments.api.lifecycle import CommitApi, HeartbeatApi
from attachments.api.serializers import AttachmentOutputSerializer, AttachmentResource
from attachments.errors import ValidationFailed
from attachments.models import Attachment, Lifecycle, Status
from attachments.uploads.api import UploadCompleteApi, UploadIntentApi
from tests.support import create_intent, jpeg_bytes, run_pipeline, upload

IntentInput = UploadIntentApi.InputSerializer
BODY = {"profile": "image", "filename": "cat.jpg", "size": 1000, "content_type": "image/jpeg"}


def _fresh(serializer_class, data):
    """DRF's own per-request way: (validated data, None) or (None, error detail)."""
    serializer = serializer_class(data=data)
    if serializer.is_valid():
        return dict(serializer.validated_data), None
    return None, serializer.errors


def _shared_answer(serializer_class, data):
    try:
        return dict(serializer_class.validate_body(data)), None
    except serializers.ValidationError as exc:
        return None, exc.detail


# --- input -------------------------------------------------------------------------------

_text = st.one_of(
    st.text(max_size=80),
    st.sampled_from(
        [
            "image",
            " image ",
            "",
            "   ",
            "image/jpeg",
            "a\x00b",
            "\ud800",
            "x" * 64,
            "x" * 65,
            "x" * 255,
            "x" * 256,
            "x" * 1024,
            "x" * 1025,
            "é.jpg",
        ]
    ),
)
_value = st.one_of(
    _text,
    st.integers(min_value=-3, max_value=2**63),
    st.booleans(),
    st.none(),
    st.floats(),
    st.lists(st.integers(), max_size=2),
    st.just("12"),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.dictionaries(st.sampled_from(["profile", "filename", "size", "content_type", "extra"]), _value),
        st.fixed_dictionaries(
            {
                "profile": _text,
                "filename": _text,
                "content_type": _text,
                "size": st.one_of(st.integers(min_value=-2, max_value=2**62 + 2), _value),
            }
        ),
    )
)
def test_shared_validation_answers_as_a_fresh_serializer(data):
    assert _shared_answer(IntentInput, data) == _fresh(IntentInput, data)


@pytest.mark.parametrize(
    "serializer_class, data",
    [
        (HeartbeatApi.InputSerializer, {"ids": []}),
        (HeartbeatApi.InputSerializer, {"ids": ["a", 1]}),
        (HeartbeatApi.InputSerializer, {"ids": ["x"] * 1001}),
        (HeartbeatApi.InputSerializer, {"ids": ["a", "b"]}),
        (CommitApi.InputSerializer, {"ids": ["a"], "ref": ""}),
        (CommitApi.InputSerializer, {"ids": ["a"], "ref": "r" * 201}),
        (CommitApi.InputSerializer, {"ids": ["a"], "ref": "listing:1"}),
        (
            UploadCompleteApi.InputSerializer,
            {"parts": [{"part_number": 1, "etag": "e"}, {"part_number": 1, "etag": "f"}]},
        ),
        (UploadCompleteApi.InputSerializer, {"parts": [{"part_number": "1", "etag": "e"}, {"part_number": 2}]}),
        (UploadCompleteApi.InputSerializer, {"parts": []}),
        (UploadCompleteApi.InputSerializer, {"parts": "nope"}),
        (
            UploadCompleteApi.InputSerializer,
            {"parts": [{"part_number": 1, "etag": "e"}, {"part_number": 2, "etag": "f"}]},
        ),
    ],
)
def test_every_input_validates_as_a_fresh_serializer(serializer_class, data):
    assert _shared_answer(serializer_class, data) == _fresh(serializer_class, data)


@pytest.mark.parametrize(
    "field, value",
    [
        ("size", "123"),
        ("size", True),
        ("size", 1.5),
        ("size", None),
        ("size", -1),
        ("size", 2**62 + 1),
        ("filename", 7),
        ("filename", ["a"]),
        ("filename", None),
        ("profile", 1),
        ("content_type", False),
        ("content_type", "x" * 256),
        ("filename", "x" * 1025),
        ("filename", "a\ud800b"),
        ("profile", "\udfff"),
    ],
)
def test_strict_types_are_errors_named_by_field(field, value):
    with pytest.raises(serializers.ValidationError) as caught:
        IntentInput.validate_body({**BODY, field: value})
    assert set(caught.value.detail) == {field}


@pytest.mark.parametrize("body", [[BODY], "body", 1, None])
def test_a_body_that_is_not_an_object_is_refused_before_the_fields(body):
    with pytest.raises(ValidationFailed) as caught:
        IntentInput.validate_body(body)
    assert caught.value.details == {"non_field_errors": ["Expected an object."]}


def test_valid_body_keeps_filename_spaces_and_trims_the_rest():
    body = {"profile": " image ", "filename": " cat.jpg ", "size": 0, "content_type": " image/jpeg "}
    assert IntentInput.validate_body(body) == {
        "profile": "image",
        "filename": " cat.jpg ",
        "size": 0,
        "content_type": "image/jpeg",
    }


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["123", True, 1.5])
def test_api_refuses_a_size_that_is_not_an_integer(alice, api, value):
    response = api(alice).post("/api/v1/uploads", {**BODY, "size": value}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR" and "size" in response.json()["error"]["details"]


# --- output --------------------------------------------------------------------------------

NOW = datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)


def _row(**fields) -> Attachment:
    values = {
        "id": uuid.UUID("8c0e3d4e-0000-4000-8000-000000000001"),
        "subject": "user-7",
        "profile": "image",
        "status": Status.READY,
        "filename": "cat.jpg",
        "size": 10,
        "content_type": "image/jpeg",
        "sha256": "ab" * 32,
        "created_at": NOW,
        "ready_at": NOW + timedelta(seconds=2),
        "expires_at": NOW + timedelta(days=7),
        "lifecycle": Lifecycle.STAGED,
        "ref": None,
        "reason_code": "",
        "reason_message": "",
        "metadata": {"width": 3, "height": 2},
        "approval": "not_required",
    }
    ref_held = fields.pop("ref_held", False)  # what for_resource() annotates from the active ref holds
    values.update(fields)
    row = Attachment(**values)
    row.ref_held = ref_held  # type: ignore[attr-defined]
    return row


URL = "http://testserver/api/v1/attachments/8c0e3d4e-0000-4000-8000-000000000001"
TWIN = uuid.UUID("8c0e3d4e-0000-4000-8000-000000000002")
WEB_READY = {"status": "ready", "progress": 1.0, "codec": "h264", "width": 1080, "height": 1920, "bytes": 5_000_000}


def _video_metadata(status: str) -> dict:
    web = dict(WEB_READY) if status == "ready" else {**dict.fromkeys(WEB_READY), "status": status}
    if status == "pending":
        web["progress"] = 0.25
    # What the state keeps for itself (a claim, its attempts) is never shown.
    web.update(claim="c0ffee", claimed_until="2026-12-01T10:05:00+00:00", attempts=1)
    return {"duration_seconds": 8.0, "width": 1080, "height": 1920, "renditions": {"web": web}}


RESOURCES = {
    "ready, readable, thumbnail": AttachmentResource(_row(), URL, True, {"width": 1, "height": 2}, NOW),
    "ready, not readable": AttachmentResource(_row(), URL, False, None),
    "pending": AttachmentResource(
        _row(status=Status.PENDING, size=None, sha256="", ready_at=None), URL, False, None, NOW
    ),
    "rejected": AttachmentResource(
        _row(status=Status.REJECTED, reason_code="malware", reason_message="EICAR"), URL, False, None, NOW
    ),
    "ready, expired draft": AttachmentResource(_row(), URL, False, None, NOW + timedelta(days=8)),
    "ready, released": AttachmentResource(_row(lifecycle=Lifecycle.RELEASED), URL, False, None, NOW),
    "ready, discarded": AttachmentResource(_row(lifecycle=Lifecycle.DISCARDED), URL, False, None, NOW),
    "failed": AttachmentResource(_row(status=Status.FAILED, reason_code="infrastructure"), URL),
    "committed": AttachmentResource(_row(lifecycle=Lifecycle.COMMITTED, ref="listing:1"), URL, True),
    "held": AttachmentResource(_row(legal_hold=True), URL, True),
    "awaiting approval": AttachmentResource(_row(approval="pending"), URL, False, None, NOW),
    "awaiting approval, to its host": AttachmentResource(
        _row(approval="pending", metadata={"display": {"width": 3, "height": 2}}),
        URL,
        True,
        {"width": 1, "height": 2},
        NOW,
        True,
    ),
    "ref held": AttachmentResource(_row(lifecycle=Lifecycle.COMMITTED, ref="listing:1", ref_held=True), URL, True),
    "archive": AttachmentResource(_row(metadata={"entries": 3, "total_bytes": 9}), URL, True),
    "document": AttachmentResource(_row(metadata={"page_count": 4}), URL, True),
    "no metadata": AttachmentResource(_row(metadata=None), URL, True),
    "video, rendition ready": AttachmentResource(
        _row(profile="media", metadata=_video_metadata("ready")), URL, True, {"width": 1, "height": 2}
    ),
    "video, rendition pending": AttachmentResource(
        _row(profile="media", metadata=_video_metadata("pending")), URL, True
    ),
    "video, not readable": AttachmentResource(_row(profile="media", metadata=_video_metadata("ready")), URL, False),
    "duplicate": AttachmentResource(_row(duplicate_of=TWIN), URL, True),
    "duplicate, rejected since": AttachmentResource(
        _row(status=Status.REJECTED, duplicate_of=TWIN, reason_code="malware"), URL, True
    ),
    "video, not needed": AttachmentResource(_row(profile="media", metadata=_video_metadata("not_needed")), URL, True),
}


@pytest.mark.parametrize("name", sorted(RESOURCES))
def test_shared_render_is_what_a_fresh_serializer_renders(name):
    resource = RESOURCES[name]
    assert AttachmentOutputSerializer.render(resource) == AttachmentOutputSerializer(resource).data


def _signed(name: str) -> str:
    """The resource's signed link to `name` (tests/api/test_signed_links.py checks the signature itself)."""
    query = signing.delivery_query(
        tenant_id=None, attachment_id=uuid.UUID(URL.rsplit("/", 1)[1]), name=name, exp=signing.delivery_expiry()
    )
    return f"{URL}/{name}?{query}"


def _signed_variant(name: str) -> str:
    query = signing.delivery_query(
        tenant_id=None,
        attachment_id=uuid.UUID(URL.rsplit("/", 1)[1]),
        name=f"variant-{name}",
        exp=signing.delivery_expiry(),
    )
    return f"{URL}/variants/{name}?{query}"


def test_the_resource_shape_is_the_contract(monkeypatch):
    monkeypatch.setattr(signing, "_now", lambda: 1_800_000_000.0)  # one expiry step for the whole test
    assert AttachmentOutputSerializer.render(RESOURCES["ready, readable, thumbnail"]) == {
        "id": "8c0e3d4e-0000-4000-8000-000000000001",
        "subject": "user-7",
        "profile": "image",
        "status": "ready",
        "available": True,
        "reason": None,
        "filename": "cat.jpg",
        "size": 10,
        "content_type": "image/jpeg",
        "sha256": "ab" * 32,
        "duplicate_of": None,
        "created_at": "2026-12-01T10:00:00.123456Z",
        "ready_at": "2026-12-01T10:00:02.123456Z",
        "expires_at": "2026-12-08T10:00:00.123456Z",
        "committed": False,
        "lifecycle": "staged",
        "ref": None,
        "legal_hold": False,
        "approval": "not_required",
        "derivatives": {"thumbnail": {"width": 1, "height": 2}},
        "metadata": {"width": 3, "height": 2, "page_count": None},
        "links": {
            "self": URL,
            "download": _signed("download"),
            "thumbnail": _signed("thumbnail"),
            "variants": {name: _signed_variant(name) for name in ("small", "medium", "large")},
        },
    }
    pending = AttachmentOutputSerializer.render(RESOURCES["pending"])
    assert (pending["size"], pending["content_type"], pending["sha256"], pending["ready_at"]) == (None,) * 4
    assert pending["derivatives"] == {} and pending["links"] == {"self": URL} and pending["available"] is False
    rejected = AttachmentOutputSerializer.render(RESOURCES["rejected"])
    assert rejected["reason"] == {"code": "malware", "message": "EICAR"} and rejected["links"] == {"self": URL}
    assert rejected["available"] is False
    for name in ("ready, expired draft", "ready, released", "ready, discarded"):
        body = AttachmentOutputSerializer.render(RESOURCES[name])
        assert (body["status"], body["available"]) == ("ready", False), name
    committed = AttachmentOutputSerializer.render(RESOURCES["committed"])
    assert committed["expires_at"] is None and committed["committed"] is True and committed["ref"] == "listing:1"
    assert committed["lifecycle"] == "committed" and committed["legal_hold"] is False
    assert AttachmentOutputSerializer.render(RESOURCES["held"])["legal_hold"] is True
    assert AttachmentOutputSerializer.render(RESOURCES["awaiting approval"])["approval"] == "pending"
    assert AttachmentOutputSerializer.render(RESOURCES["ref held"])["legal_hold"] is True
    archive = AttachmentOutputSerializer.render(RESOURCES["archive"])
    assert archive["metadata"] == {"width": None, "height": None, "page_count": None, "entries": 3, "total_bytes": 9}
    assert archive["derivatives"] == {"entries": {"count": 3, "total_bytes": 9}}
    assert AttachmentOutputSerializer.render(RESOURCES["document"])["derivatives"] == {"page_count": 4}
    assert "renditions" not in AttachmentOutputSerializer.render(RESOURCES["ready, readable, thumbnail"])
    video = AttachmentOutputSerializer.render(RESOURCES["video, rendition ready"])
    assert video["renditions"] == {"web": WEB_READY}
    assert video["links"]["web"] == _signed("web")
    pending = AttachmentOutputSerializer.render(RESOURCES["video, rendition pending"])
    assert pending["renditions"]["web"] == {**dict.fromkeys(WEB_READY), "status": "pending", "progress": 0.25}
    assert "web" not in pending["links"]
    assert "web" not in AttachmentOutputSerializer.render(RESOURCES["video, not readable"])["links"]
    assert AttachmentOutputSerializer.render(RESOURCES["duplicate"])["duplicate_of"] == str(TWIN)
    assert AttachmentOutputSerializer.render(RESOURCES["duplicate, rejected since"])["duplicate_of"] is None
    not_needed = AttachmentOutputSerializer.render(RESOURCES["video, not needed"])
    assert not_needed["renditions"]["web"]["status"] == "not_needed" and "web" not in not_needed["links"]


def test_concurrent_renders_do_not_see_each_others_values():
    rows = [_row(id=uuid.uuid4(), filename=f"f{i}.jpg") for i in range(64)]
    failures: list[str] = []

    def render_many(offset: int) -> None:
        for round_ in range(200):
            row = rows[(offset + round_) % len(rows)]
            url = f"http://h/api/v1/attachments/{row.pk}"
            body = AttachmentOutputSerializer.render(AttachmentResource(row, url, True))
            if body["id"] != str(row.pk) or body["filename"] != row.filename or body["links"]["self"] != url:
                failures.append(f"{row.pk}: {body['id']} {body['links']['self']}")

    threads = [threading.Thread(target=render_many, args=(n * 7,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


# --- the hot paths build no serializer per request ------------------------------------------------


@pytest.mark.django_db
def test_hot_paths_build_no_serializer_fields_per_request(alice, api, monkeypatch):
    client = api(alice)
    pk = upload(client, jpeg_bytes())
    assert run_pipeline(pk) == "ready"
    for _ in range(2):  # the first requests of a process build each shared serializer once
        assert create_intent(client).status_code == 201
        assert client.get(f"/api/v1/attachments/{pk}").status_code == 200
        assert client.get("/api/v1/attachments").status_code == 200
    built = []
    original = serializers.Serializer.get_fields

    def counting(self):
        built.append(type(self).__name__)
        return original(self)

    monkeypatch.setattr(serializers.Serializer, "get_fields", counting)
    assert create_intent(client).status_code == 201
    assert client.get(f"/api/v1/attachments/{pk}").status_code == 200
    assert client.get("/api/v1/attachments").status_code == 200
    assert built == []


@pytest.mark.django_db
def test_shared_instances_hold_no_request_state(alice, api):
    client = api(alice)
    intent = create_intent(client)
    assert intent.status_code == 201
    assert client.get(f"/api/v1/attachments/{intent.json()['id']}").status_code == 200
    assert client.post("/api/v1/uploads", {**BODY, "size": "x"}, format="json").status_code == 400
    for serializer_class in (IntentInput, UploadIntentApi.OutputSerializer, AttachmentOutputSerializer):
        shared = _shared(serializer_class)
        assert shared.instance is None and shared._context == {}
        assert not hasattr(shared, "initial_data") and not hasattr(shared, "_validated_data")
        assert not hasattr(shared, "_errors") and not hasattr(shared, "_data")


def test_drf_is_the_major_the_fast_path_was_measured_on():
    assert rest_framework.VERSION.split(".")[0] == "3", "pyproject pins DRF 3; re-measure fastpath_serializer.py"


def test_each_class_is_built_once_and_reused():
    class Probe(SharedSerializer):
        name = serializers.CharField()

    first = _shared(Probe)
    assert Probe.render({"name": "a"}) == {"name": "a"} and _shared(Probe) is first
    assert Probe.validate_body({"name": "b"}) == {"name": "b"} and _shared(Probe) is first
    assert first.fields["name"].parent is first  # bound once, to the shared instance
