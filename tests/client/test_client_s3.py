"""The Python client against `manage.py serve` on S3 (moto over HTTP): presigned POST and PUT, multipart, resume."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from airlock_client import UploadInterrupted
from tests.client.conftest import MIB, FailingFile, Recorder, big_pdf
from tests.s3.support import moto_bucket_env
from tests.support import jpeg_bytes

pytestmark = [pytest.mark.slow, pytest.mark.s3]


def _serve_on_s3(serve_factory, moto_endpoint, bucket_prefix: str, **env: str | dict[str, object]):
    """`manage.py serve` on a fresh moto bucket, with these settings on top; .moto is the endpoint."""
    live = serve_factory({**moto_bucket_env(moto_endpoint, bucket_prefix), **env})
    live.moto = moto_endpoint
    return live


@pytest.fixture(scope="module")
def live(serve_factory, moto_endpoint):
    return _serve_on_s3(
        serve_factory,
        moto_endpoint,
        "client",
        AIRLOCK_S3_UPLOAD_METHOD="POST",
        AIRLOCK_S3_MULTIPART={"threshold_bytes": 5 * MIB, "part_bytes": 5 * MIB},
    )


def test_a_small_file_goes_by_the_presigned_post_and_downloads_through_the_redirect(live, tmp_path):
    path = tmp_path / "cat.jpg"
    path.write_bytes(jpeg_bytes((320, 240)))
    recorder = Recorder()
    # A tiny tus threshold changes nothing on S3: the bucket's own plan is followed.
    with live.client(transport=recorder, tus_threshold=1) as client:
        pending = client.upload(path, profile="image")
        ready = client.wait(pending["id"], timeout=60)
        assert ready["status"] == "ready"
        target = client.download(pending["id"], tmp_path / "got.jpg")
    to_bucket = [(m, h) for m, url, h, status in recorder.seen if url.startswith(live.moto) and m == "POST"]
    assert len(to_bucket) == 1 and to_bucket[0][1]["content-type"].startswith("multipart/form-data")
    assert "authorization" not in to_bucket[0][1]  # the API token never goes to the bucket
    assert "PATCH" not in recorder.methods()
    assert any(url.endswith(f"/uploads/{pending['id']}/complete") for m, url, *_ in recorder.seen if m == "POST")
    assert hashlib.sha256(target.read_bytes()).hexdigest() == ready["sha256"]


def test_a_large_file_goes_by_multipart_and_a_broken_one_resumes_with_resigned_parts(live, tmp_path):
    data = big_pdf(12 * MIB, seed=6)
    path = tmp_path / "big.pdf"
    path.write_bytes(data)
    failing = FailingFile(path, fail_at=7 * MIB)  # inside part 2 (5 MiB parts)
    recorder = Recorder()
    with live.client(transport=recorder) as client, pytest.raises(UploadInterrupted) as caught:
        # The digest is given: the failing file could not be read through to compute it.
        client.upload(failing, profile="document", filename="big.pdf", sha256=hashlib.sha256(data).hexdigest())
    failing.close()
    interrupted = caught.value
    assert interrupted.transport == "multipart" and interrupted.sent == 5 * MIB
    parts = [url for m, url, h, status in recorder.seen if m == "PUT" and url.startswith(live.moto)]
    assert len(parts) == 1 and "partNumber=1" in parts[0]

    # Another client, later: the server re-signs what is missing and keeps part 1's ETag.
    recorder, progress = Recorder(), []
    with live.client(transport=recorder) as other:
        attachment = other.resume(interrupted.attachment_id, path, on_progress=lambda s, t: progress.append(s))
        final = other.wait(attachment["id"], timeout=120)
    resigned = [url for m, url, *_ in recorder.seen if m == "POST" and url.endswith("/parts")]
    sent = sorted(
        url.split("partNumber=")[1].split("&")[0]
        for m, url, *_ in recorder.seen
        if m == "PUT" and url.startswith(live.moto)
    )
    assert len(resigned) == 1 and sent == ["2", "3"]
    assert progress[0] == 5 * MIB and progress[-1] == len(data)
    # Intake hashed the assembled object against the declared digest.
    assert final["status"] == "ready" and final["sha256"] == hashlib.sha256(data).hexdigest()


def test_multipart_with_the_right_digest_is_ready_and_downloads_intact(live, tmp_path):
    data = big_pdf(11 * MIB, seed=7)
    path = tmp_path / "ok.pdf"
    path.write_bytes(data)
    with live.client() as client:
        pending = client.upload(path, profile="document")  # sha256 computed and declared
        ready = client.wait(pending["id"], timeout=120)
        assert ready["status"] == "ready" and ready["sha256"] == hashlib.sha256(data).hexdigest()
        partial = tmp_path / "ok-copy.pdf.part"
        partial.write_bytes(data[: 3 * MIB])
        assert client.download(pending["id"], tmp_path / "ok-copy.pdf").read_bytes() == data


@pytest.fixture(scope="module")
def live_put(serve_factory, moto_endpoint):
    """The same server shape with AIRLOCK_S3_UPLOAD_METHOD=PUT: presigned PUTs instead of POST forms."""
    return _serve_on_s3(serve_factory, moto_endpoint, "client-put", AIRLOCK_S3_UPLOAD_METHOD="PUT")


def test_a_small_file_goes_by_the_presigned_put_with_its_signed_headers(live_put, tmp_path):
    path = tmp_path / "dog.jpg"
    path.write_bytes(jpeg_bytes((300, 200), color=(20, 90, 200)))
    recorder = Recorder()
    with live_put.client(transport=recorder) as client:
        pending = client.upload(path, profile="image")
        ready = client.wait(pending["id"], timeout=60)
    puts = [(url, h, status) for m, url, h, status in recorder.seen if m == "PUT" and url.startswith(live_put.moto)]
    assert len(puts) == 1
    url, headers, status = puts[0]
    assert status == 200 and "X-Amz-Signature=" in url
    # Sent exactly as planned: the signed If-None-Match (single use), the declared digest, no API token.
    assert headers["if-none-match"] == "*" and headers["content-type"] == "image/jpeg"
    assert headers["x-amz-checksum-sha256"]
    assert int(headers["content-length"]) == path.stat().st_size
    assert "authorization" not in headers
    assert "POST" not in [m for m, u, *_ in recorder.seen if u.startswith(live_put.moto)]
    assert any(u.endswith(f"/uploads/{pending['id']}/complete") for m, u, *_ in recorder.seen if m == "POST")
    assert ready["status"] == "ready" and ready["derivatives"]["thumbnail"]


def test_a_host_hands_the_put_plan_to_a_browser_and_completes_it(live_put, tmp_path):
    """create_intent + complete: the host keeps the token, another party (a browser) sends the bytes."""
    data = jpeg_bytes((200, 150), color=(10, 160, 40))
    with live_put.client() as host:
        intent = host.create_intent(profile="image", filename="car.jpg", size=len(data), content_type="image/jpeg")
        plan = intent["upload"]
        assert plan["method"] == "PUT" and plan["url"].startswith(live_put.moto)
        # The "browser": no Airlock credential at all, only the plan.
        first = httpx.put(plan["url"], headers=plan["headers"], content=data)
        again = httpx.put(plan["url"], headers=plan["headers"], content=data)
        assert first.status_code == 200
        assert again.status_code == 412  # If-None-Match: *: the presigned URL is single use
        assert host.complete(intent["id"])["id"] == intent["id"]
        assert host.wait(intent["id"], timeout=60)["status"] == "ready"
