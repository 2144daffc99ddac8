"""The Python client against `manage.py serve` on local storage: signed PUT, tus, resume, lifecycle, downloads,
webhooks and typed errors."""

from __future__ import annotations

import hashlib
import json
import time
import uuid

import httpx
import pytest

from airlock_client import (
    AlreadyCommitted,
    AttachmentInvalid,
    ChecksumMismatch,
    Client,
    DownloadMismatch,
    NotAuthenticated,
    NotFound,
    QuotaExceeded,
    RateLimited,
    Retryable,
    TypeNotAllowed,
    UploadInterrupted,
    WebhookVerificationError,
    verify_webhook,
)
from tests.client.conftest import MIB, WEBHOOK_SECRET, FailingFile, Recorder, big_pdf
from tests.support import jpeg_bytes
from tests.webhooks.receiver import Receiver

pytestmark = pytest.mark.slow
KIB = 1 << 10


@pytest.fixture(scope="module")
def live(serve_factory):
    receiver = Receiver().start()
    return serve_factory(
        {
            "AIRLOCK_WEBHOOK_URL": receiver.url,
            "AIRLOCK_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "AIRLOCK_WEBHOOK_ALLOW_PRIVATE": "1",
            "AIRLOCK_TENANT_QUOTA": {"bytes": 100 * MIB},
            "AIRLOCK_RATE_LIMITS": {"pending_per_subject": 10},
        },
        users=(("alice", "acme"), ("bob", "acme"), ("mallory", "evil")),
        receiver=receiver,
    )


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_small_file_goes_by_the_signed_put_with_its_sha256_declared(live, tmp_path):
    path = tmp_path / "cat.jpg"
    path.write_bytes(jpeg_bytes((320, 240)))
    recorder, progress = Recorder(), []
    with live.client(transport=recorder) as client:
        pending = client.upload(path, profile="image", on_progress=lambda sent, total: progress.append((sent, total)))
        assert pending["status"] == "pending" and pending["filename"] == "cat.jpg"
        assert client.wait(pending["id"], timeout=60)["status"] == "ready"
    intent = next(h for m, url, h, _ in recorder.seen if m == "POST" and url.endswith("/api/v1/uploads"))
    put = [(url, status) for m, url, _, status in recorder.seen if m == "PUT"]
    assert len(put) == 1 and "/content?token=" in put[0][0] and put[0][1] == 202
    assert "PATCH" not in recorder.methods()
    assert progress[-1] == (path.stat().st_size, path.stat().st_size)
    assert [sent for sent, _ in progress] == sorted(sent for sent, _ in progress)
    assert intent["authorization"].startswith("Token ")
    # The PUT to the signed URL never carries the API token.
    assert all("authorization" not in h for m, _, h, _ in recorder.seen if m == "PUT")


def test_a_wrong_declared_sha256_is_refused_while_the_bytes_stream(live, tmp_path):
    path = tmp_path / "cat.jpg"
    path.write_bytes(jpeg_bytes())
    with live.client() as client, pytest.raises(ChecksumMismatch) as caught:
        client.upload(path, profile="image", sha256="0" * 64)
    assert caught.value.status == 400 and caught.value.code == "CHECKSUM_MISMATCH"


def test_above_the_threshold_the_upload_goes_by_tus_in_chunks(live, tmp_path):
    data = big_pdf(300 * KIB, seed=2)
    path = tmp_path / "big.pdf"
    path.write_bytes(data)
    recorder = Recorder()
    with live.client(transport=recorder, tus_threshold=100 * KIB, tus_chunk_size=64 * KIB) as client:
        first = client.upload(path, profile="document")
        # The first intent showed the local backend: it was discarded and tus used instead.
        assert recorder.methods().count("PATCH") == 5
        discarded = [url for m, url, *_ in recorder.seen if m == "POST" and url.endswith("/discard")]
        assert len(discarded) == 1
        recorder.seen.clear()
        second = client.upload(path, profile="document")  # now known: straight to tus
        assert "/api/v1/uploads" not in " ".join(url for m, url, *_ in recorder.seen if m == "POST")
        for attachment in (first, second):
            ready = client.wait(attachment["id"], timeout=60)
            assert ready["status"] == "ready" and ready["sha256"] == _sha(data)


def test_a_tus_upload_cut_mid_chunk_resumes_from_the_servers_offset(live, tmp_path):
    data = big_pdf(400 * KIB, seed=3)
    path = tmp_path / "cut.pdf"
    path.write_bytes(data)
    recorder = Recorder(break_patch=3)
    with live.client(transport=recorder, tus_chunk_size=64 * KIB, sleep=lambda s: None) as client:
        pending = client.upload(path, profile="document", transport="tus")
        ready = client.wait(pending["id"], timeout=60)
    assert ready["status"] == "ready" and ready["sha256"] == _sha(data)
    broken = next(i for i, (m, *_rest, status) in enumerate(recorder.seen) if status == -1)
    head = recorder.seen[broken + 1]
    assert head[0] == "HEAD" and head[3] == 200
    resumed = recorder.seen[broken + 2]
    # Half of the broken chunk had arrived: the next PATCH starts there, not at a chunk boundary.
    assert resumed[0] == "PATCH" and int(resumed[2]["upload-offset"]) == 2 * 64 * KIB + 32 * KIB


def test_an_interrupted_tus_upload_resumes_from_another_client(live, tmp_path):
    data = big_pdf(300 * KIB, seed=4)
    path = tmp_path / "resume.pdf"
    path.write_bytes(data)
    failing = FailingFile(path, fail_at=150 * KIB)
    with live.client(tus_chunk_size=64 * KIB) as client, pytest.raises(UploadInterrupted) as caught:
        client.upload(failing, profile="document", filename="resume.pdf", transport="tus")
    failing.close()
    interrupted = caught.value
    assert interrupted.transport == "tus" and interrupted.sent == 128 * KIB
    progress = []
    with live.client(tus_chunk_size=64 * KIB) as other:
        attachment = other.resume(interrupted.attachment_id, path, on_progress=lambda s, t: progress.append(s))
        assert progress[0] == 128 * KIB and progress[-1] == len(data)
        ready = other.wait(attachment["id"], timeout=60)
    assert ready["status"] == "ready" and ready["sha256"] == _sha(data) and ready["filename"] == "resume.pdf"


def test_wait_commit_heartbeat_release_discard_and_pagination(live, tmp_path):
    with live.client() as client:
        ids = [client.upload(_jpeg(tmp_path, f"p{i}.jpg", i), profile="image")["id"] for i in range(3)]
        assert {client.wait(i, timeout=60)["status"] for i in ids} == {"ready"}
        beat = client.heartbeat([*ids, str(uuid.uuid4())])
        assert {a["id"] for a in beat["attachments"]} == set(ids) and len(beat["missing"]) == 1
        ref = f"ad:{uuid.uuid4().hex[:8]}"
        assert sorted(client.commit(ids[:2], ref)["committed"]) == sorted(ids[:2])
        with pytest.raises(AlreadyCommitted) as committed:
            client.discard(ids[0])
        assert committed.value.status == 409
        client.discard(ids[2])
        assert client.get(ids[2])["lifecycle"] == "discarded"
        with pytest.raises(AttachmentInvalid) as invalid:
            client.commit([ids[2]], ref)
        assert invalid.value.details == {ids[2]: "discarded"}
        listed = [a["id"] for a in client.iter_attachments(committed=True, limit=1)]
        assert set(ids[:2]) <= set(listed) and len(listed) == len(set(listed))
        assert sorted(client.release(ref=ref)) == sorted(ids[:2])
        assert {client.get(i)["lifecycle"] for i in ids[:2]} == {"released"}
        client.restore(ids[0])
        assert client.get(ids[0])["lifecycle"] == "committed"
        assert client.usage()["bytes_limit"] == 100 * MIB


def test_download_resumes_a_partial_file_with_a_range_request(live, tmp_path):
    data = big_pdf(200 * KIB, seed=5)
    path = tmp_path / "doc.pdf"
    path.write_bytes(data)
    recorder = Recorder()
    with live.client(transport=recorder) as client:
        attachment_id = client.upload(path, profile="document")["id"]
        assert client.wait(attachment_id, timeout=60)["status"] == "ready"
        target = tmp_path / "out" / "doc.pdf"
        target.parent.mkdir()
        target.with_name("doc.pdf.part").write_bytes(data[: 70 * KIB])
        recorder.seen.clear()
        assert client.download(attachment_id, target).read_bytes() == data
        get = [(h.get("range"), status) for m, url, h, status in recorder.seen if url.endswith("/download")]
        assert get == [(f"bytes={70 * KIB}-", 206)]
        assert not target.with_name("doc.pdf.part").exists()
        # A partial file that is not the beginning of this one is caught by the digest, not kept.
        target.unlink()
        target.with_name("doc.pdf.part").write_bytes(b"x" * (70 * KIB))
        with pytest.raises(DownloadMismatch):
            client.download(attachment_id, target)
        assert not target.exists() and not target.with_name("doc.pdf.part").exists()
        thumb = client.download(attachment_id, tmp_path / "thumb.webp", rendition="thumbnail")
        assert thumb.read_bytes()[8:12] == b"WEBP"


def test_verify_webhook_accepts_airlocks_delivery_and_refuses_a_tampered_one(live, tmp_path):
    with live.client() as client:
        attachment_id = client.upload(_jpeg(tmp_path, "hook.jpg", 9), profile="image")["id"]
        assert client.wait(attachment_id, timeout=60)["status"] == "ready"
    delivery = _delivery(live.receiver, attachment_id, "attachment.ready")
    event = verify_webhook(delivery.headers, delivery.body, WEBHOOK_SECRET)
    assert event["type"] == "attachment.ready" and event["data"]["id"] == attachment_id
    assert Client.verify_webhook(delivery.headers, delivery.body, ["whsec_" + "A" * 44, WEBHOOK_SECRET])
    tampered = delivery.body.replace(b'"ready"', b'"rejected"', 1)
    assert tampered != delivery.body
    with pytest.raises(WebhookVerificationError):
        verify_webhook(delivery.headers, tampered, WEBHOOK_SECRET)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(delivery.headers, delivery.body, "whsec_" + "A" * 44)
    with pytest.raises(WebhookVerificationError):  # replayed ten minutes later
        verify_webhook(delivery.headers, delivery.body, WEBHOOK_SECRET, now=time.time() + 600)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(
            {k: v for k, v in delivery.headers.items() if k != "webhook-signature"}, delivery.body, WEBHOOK_SECRET
        )


def test_errors_are_typed_from_the_api_codes(live, tmp_path):
    with live.client() as client:
        with pytest.raises(NotFound) as missing:
            client.get(str(uuid.uuid4()))
        assert (missing.value.status, missing.value.code) == (404, "NOT_FOUND")
        text = tmp_path / "notes.txt"
        text.write_bytes(b"hello")
        with pytest.raises(TypeNotAllowed) as refused:
            client.upload(text, profile="image")
        assert refused.value.status == 400 and "image/jpeg" in refused.value.details["content_type"][0]
        huge = tmp_path / "huge.mp4"
        with huge.open("wb") as sparse:
            sparse.truncate(150 * MIB)
        with pytest.raises(QuotaExceeded) as quota:
            client.upload(huge, profile="media", sha256=False)
        assert quota.value.status == 413 and quota.value.details["quota"] == "bytes"
    with live.client("mallory") as other, pytest.raises(NotFound):
        other.get(next(iter(_ids(live))))
    with Client(live.server.base, "not-a-token") as anonymous, pytest.raises(NotAuthenticated):
        anonymous.usage()


def test_rate_limits_are_retried_after_retry_after_then_raised(live, tmp_path):
    token = live.tokens["bob"]
    for _ in range(10):  # the pending cap: intents whose bytes never come
        httpx.post(
            f"{live.server.base}/api/v1/uploads",
            headers={"Authorization": f"Token {token}"},
            json={"profile": "image", "filename": "x.jpg", "size": 10, "content_type": "image/jpeg"},
        ).raise_for_status()
    slept: list[float] = []
    with live.client("bob", max_retries=2, sleep=slept.append) as client, pytest.raises(RateLimited) as limited:
        client.upload(_jpeg(tmp_path, "one-more.jpg", 1), profile="image")
    error = limited.value
    assert isinstance(error, Retryable) and error.status == 429 and error.retry_after == 60
    assert len(slept) == 2 and all(60 <= s <= 72 for s in slept)


def test_a_503_is_retried_after_its_retry_after_and_then_succeeds():
    answers = iter(
        [
            httpx.Response(
                503,
                headers={"Retry-After": "3"},
                json={"error": {"code": "UNAVAILABLE", "message": "database down", "details": {}}},
            ),
            httpx.Response(200, json={"bytes_used": 1, "bytes_limit": None, "files_used": 1, "files_limit": None}),
        ]
    )
    slept: list[float] = []
    with Client(
        "http://airlock.test", "t", transport=httpx.MockTransport(lambda request: next(answers)), sleep=slept.append
    ) as client:
        assert client.usage()["bytes_used"] == 1
    assert len(slept) == 1 and 3 <= slept[0] <= 3.6


def _jpeg(tmp_path, name: str, seed: int):
    path = tmp_path / name
    path.write_bytes(jpeg_bytes((96, 64), color=(seed * 20 % 256, 80, 120)))
    return path


def _ids(live) -> list[str]:
    with live.client() as client:
        return [a["id"] for a in client.iter_attachments(status="ready")]


def _delivery(receiver: Receiver, attachment_id: str, event_type: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    with receiver.arrived:
        while time.monotonic() < deadline:
            for received in receiver.received:
                body = json.loads(received.body)
                if body["type"] == event_type and body["data"]["id"] == attachment_id:
                    return received
            receiver.arrived.wait(timeout=1)
    raise AssertionError(f"no {event_type} webhook for {attachment_id}")


@pytest.mark.parametrize("transport", ["intent", "tus"])
def test_phone_media_with_no_known_type_goes_to_camera_and_the_bytes_decide(live, tmp_path, transport):
    """A name mimetypes does not know (a camera's .HIF) is declared application/octet-stream: accepted."""
    from tests.corpus import corpus_dir

    generated = corpus_dir() / "generated"
    photo, video = tmp_path / "IMG_0001.HIF", tmp_path / "IMG_0002.MOV"
    photo.write_bytes((generated / "heic_gps_rotated.heic").read_bytes())
    video.write_bytes((generated / "video_rotated.mov").read_bytes())
    recorder = Recorder()
    with live.client(transport=recorder) as client:
        sent_photo = client.upload(photo, profile="camera", transport=transport)
        sent_video = client.upload(video, profile="camera", content_type="", transport=transport)
        ready_photo = client.wait(sent_photo["id"], timeout=60)
        ready_video = client.wait(sent_video["id"], timeout=60)
    assert ready_photo["status"] == "ready" and ready_photo["content_type"] == "image/jpeg"
    assert "display" in ready_photo["derivatives"] and "variants" in ready_photo["links"]
    assert ready_video["status"] == "ready" and ready_video["content_type"] == "video/quicktime"
    assert "poster" in ready_video["derivatives"] and "variants" not in ready_video["links"]
