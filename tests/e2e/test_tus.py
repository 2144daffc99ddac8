"""tus over HTTP against `manage.py serve`, driven by a real tus client (tuspy) in processes of its own.

Interrupted uploads resume from a new client process (after a clean stop and
after a connection cut mid-PATCH), and after `serve` itself restarts; plus
termination, expiry through the sweeper, checksums, two writers at once,
other users, a lying Upload-Length, and the same on S3 (moto over HTTP).
"""

from __future__ import annotations

import base64
import hashlib
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from tests.e2e.test_serve import ROOT
from tests.support.processes import Server, tus_create, wait_settled

MP4_HEAD = b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom"
MIB = 1 << 20


def mp4(size: int) -> bytes:
    """A playable video/mp4 (profile `media` probes it) padded with random bytes to `size`."""
    from tests.s3.support import mp4_bytes

    return mp4_bytes(size, seed=None)


def tus_client(server: Server, token: str, path: Path, store: Path, *args: str) -> tuple[str, int, int]:
    """Run tuspy in a new process; (upload URL, offset it started from, offset it reached)."""
    out = subprocess.run(
        [sys.executable, "tests/e2e/tus_client.py", server.base, token, str(path), str(store), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stdout[-1000:] + out.stderr[-3000:]
    lines = out.stdout.split("\n")
    start = next(line for line in lines if line.startswith("start ")).split()
    done = next(line for line in lines if line.startswith("done ")).split()
    assert start[1] in (done[1], "None")
    return done[1], int(start[2]), int(done[2])


def head(url: str, token: str) -> requests.Response:
    return requests.head(url, headers={"Tus-Resumable": "1.0.0", "Authorization": f"Token {token}"}, timeout=10)


def create(server: Server, token: str, length: int, *, profile: str = "media", content_type: str = "video/mp4") -> str:
    response = tus_create(server.base, token, length, profile=profile, filename="clip.mp4", content_type=content_type)
    assert response.headers["Tus-Resumable"] == "1.0.0"
    return response.headers["Location"]


def patch(url: str, token: str, body: bytes, offset: int, **headers: str) -> requests.Response:
    return requests.patch(
        url,
        data=body,
        timeout=30,
        headers={
            "Tus-Resumable": "1.0.0",
            "Authorization": f"Token {token}",
            "Upload-Offset": str(offset),
            "Content-Type": "application/offset+octet-stream",
            **headers,
        },
    )


def open_patch(url: str, token: str, offset: int, length: int) -> socket.socket:
    """A PATCH whose headers are sent and whose body is not (yet): send it, or cut it, by hand."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
    sock.sendall(
        (
            f"PATCH {parts.path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n"
            f"Tus-Resumable: 1.0.0\r\nAuthorization: Token {token}\r\n"
            f"Content-Type: application/offset+octet-stream\r\nUpload-Offset: {offset}\r\n"
            f"Content-Length: {length}\r\n\r\n"
        ).encode()
    )
    return sock


def status_of(sock: socket.socket) -> int:
    reply = b""
    while b"\r\n" not in reply:
        chunk = sock.recv(4096)
        if not chunk:
            break
        reply += chunk
    return int(reply.split(b" ", 2)[1])


def offset_settles(url: str, token: str, expected: int, timeout: float = 10) -> int:
    deadline = time.monotonic() + timeout
    while True:
        offset = int(head(url, token).headers["Upload-Offset"])
        if offset == expected or time.monotonic() > deadline:
            return offset
        time.sleep(0.1)


def download(server: Server, token: str, attachment_id: str) -> bytes:
    got = requests.get(
        f"{server.base}/api/v1/attachments/{attachment_id}/download",
        timeout=60,
        headers={"Authorization": f"Token {token}"},
        allow_redirects=False,
    )
    if got.status_code == 302:  # S3: the presigned GET
        got = requests.get(got.headers["Location"], timeout=60)
    assert got.status_code == 200, got.text[:300]
    return got.content


def _id(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("tus-serve"), {})
    server.tokens = {
        name: server.createuser(name, tenant)
        for name, tenant in (("alice", "acme"), ("bob", "acme"), ("mallory", "evil"))
    }
    yield server
    server.stop()


@pytest.mark.slow
def test_interrupted_upload_resumes_from_a_new_client_process(server, tmp_path):
    alice = server.tokens["alice"]
    data = mp4(3 * MIB + 12345)
    path = tmp_path / "clip.mp4"
    path.write_bytes(data)
    store = tmp_path / "urls.json"
    url, started, reached = tus_client(server, alice, path, store, "--stop-at", str(MIB + 7), "--chunk", str(MIB))
    assert (started, reached) == (0, MIB + 7)
    assert int(head(url, alice).headers["Upload-Offset"]) == MIB + 7
    # The process is gone; a new one finds the URL, asks for the offset and sends the rest.
    again, started, reached = tus_client(server, alice, path, store, "--chunk", str(MIB))
    assert again == url and (started, reached) == (MIB + 7, len(data))
    attachment = wait_settled(server.base, alice, _id(url))
    assert attachment["status"] == "ready", attachment
    assert attachment["size"] == len(data) and attachment["content_type"] == "video/mp4"
    assert download(server, alice, _id(url)) == data


@pytest.mark.slow
def test_a_connection_cut_mid_patch_keeps_what_arrived(server, tmp_path):
    alice = server.tokens["alice"]
    data = mp4(2 * MIB)
    url = create(server, alice, len(data))
    sock = open_patch(url, alice, 0, len(data))
    sock.sendall(data[:700_000])
    time.sleep(0.3)
    sock.close()  # mid-body: the client's network dropped
    assert offset_settles(url, alice, 700_000) == 700_000
    path = tmp_path / "clip.mp4"
    path.write_bytes(data)
    _, started, reached = tus_client(server, alice, path, tmp_path / "urls.json", "--url", url)
    assert (started, reached) == (700_000, len(data))
    assert wait_settled(server.base, alice, _id(url))["status"] == "ready"
    assert download(server, alice, _id(url)) == data


@pytest.mark.slow
def test_checksums(server, tmp_path):
    alice = server.tokens["alice"]
    data = mp4(MIB + 99)
    url = create(server, alice, len(data))
    wrong = base64.b64encode(hashlib.sha256(b"not the chunk").digest()).decode()
    refused = patch(url, alice, data[:4096], 0, **{"Upload-Checksum": f"sha256 {wrong}"})
    assert refused.status_code == 460 and refused.json()["error"]["code"] == "CHECKSUM_MISMATCH"
    assert head(url, alice).headers["Upload-Offset"] == "0"  # the chunk was dropped
    # tuspy sends a sha1 Upload-Checksum with every chunk.
    path = tmp_path / "clip.mp4"
    path.write_bytes(data)
    _, started, reached = tus_client(
        server, alice, path, tmp_path / "urls.json", "--url", url, "--checksum", "--chunk", str(256 * 1024)
    )
    assert (started, reached) == (0, len(data))
    assert wait_settled(server.base, alice, _id(url))["status"] == "ready"


@pytest.mark.slow
def test_two_writers_at_once_one_wins(server):
    alice = server.tokens["alice"]
    data = mp4(MIB)
    url = create(server, alice, len(data))
    first = open_patch(url, alice, 0, 600_000)
    first.sendall(data[:300_000])
    time.sleep(0.5)  # the first writer holds the upload while its body streams
    second = patch(url, alice, data[:600_000], 0)
    assert second.status_code == 423 and second.json()["error"]["code"] == "UPLOAD_LOCKED"
    first.sendall(data[300_000:600_000])
    assert status_of(first) == 204
    first.close()
    late = patch(url, alice, data[:600_000], 0)
    assert late.status_code == 409 and late.json()["error"]["details"]["offset"] == 600_000
    assert head(url, alice).headers["Upload-Offset"] == "600000"


@pytest.mark.slow
def test_a_stalled_writer_is_not_replaced_while_it_can_still_write(tmp_path):
    """Issue #26: a PATCH whose body stalls past the claim's staleness still holds the upload (423 for a
    second writer, HEAD says the bytes acknowledged); when it ends, what is served is what was scanned."""
    server = Server(tmp_path, {"AIRLOCK_HTTP_LIMITS": {"body_timeout_seconds": 2}})  # a claim is stale after 7 s
    try:
        alice = server.createuser("alice", "acme")
        first_bytes, second_bytes = mp4(MIB), mp4(MIB)
        url = create(server, alice, MIB)
        stalled = open_patch(url, alice, 0, MIB)
        stalled.sendall(first_bytes[:300_000])
        sent = 300_000
        stale_at = time.monotonic() + 8  # past the claim's staleness; a byte a second keeps the body alive
        while time.monotonic() < stale_at:
            stalled.sendall(first_bytes[sent : sent + 1])
            sent += 1
            time.sleep(0.5)
        assert head(url, alice).headers["Upload-Offset"] == "0"  # nothing acknowledged yet
        second = patch(url, alice, second_bytes, 0)
        assert second.status_code == 423 and second.json()["error"]["code"] == "UPLOAD_LOCKED", second.text
        stalled.sendall(first_bytes[sent:])
        assert status_of(stalled) == 204
        stalled.close()
        attachment = wait_settled(server.base, alice, _id(url))
        assert attachment["status"] == "ready", attachment
        served = download(server, alice, _id(url))
        assert served == first_bytes and hashlib.sha256(served).hexdigest() == attachment["sha256"]
        late = patch(url, alice, second_bytes, 0)
        assert late.status_code == 409 and late.json()["error"]["details"]["offset"] == MIB
    finally:
        server.stop()


@pytest.mark.slow
def test_other_users_get_404_and_a_lying_length_is_refused(server):
    alice, bob, mallory = (server.tokens[name] for name in ("alice", "bob", "mallory"))
    data = mp4(300_000)
    url = create(server, alice, len(data))
    for other in (bob, mallory):
        assert head(url, other).status_code == 404
        assert patch(url, other, data[:100], 0).status_code == 404
        assert (
            requests.delete(
                url, timeout=10, headers={"Tus-Resumable": "1.0.0", "Authorization": f"Token {other}"}
            ).status_code
            == 404
        )
    # Declared 300,000 bytes; more are refused, nothing of them is kept.
    too_many = patch(url, alice, data + b"x" * 1000, 0)
    assert too_many.status_code == 413 and too_many.json()["error"]["code"] == "TOO_LARGE"
    assert head(url, alice).headers["Upload-Offset"] == "0"
    assert patch(url, alice, data, 0).status_code == 204
    assert patch(url, alice, b"more", len(data)).status_code == 413
    assert wait_settled(server.base, alice, _id(url))["size"] == len(data)


@pytest.mark.slow
def test_termination(server, tmp_path):
    alice = server.tokens["alice"]
    data = mp4(2 * MIB)
    path = tmp_path / "clip.mp4"
    path.write_bytes(data)
    url, _, reached = tus_client(server, alice, path, tmp_path / "urls.json", "--stop-at", str(MIB))
    staged = Path(server.env["AIRLOCK_DATA_DIR"]) / "storage" / ".tus" / _id(url)
    assert staged.stat().st_size == reached == MIB
    gone = requests.delete(url, timeout=10, headers={"Tus-Resumable": "1.0.0", "Authorization": f"Token {alice}"})
    assert gone.status_code == 204 and gone.headers["Tus-Resumable"] == "1.0.0"
    assert head(url, alice).status_code == 404
    assert patch(url, alice, data[MIB:], MIB).status_code == 404
    assert not staged.exists()
    # The intent is discarded: due for the sweeper now, its download gone.
    resource = requests.get(
        f"{server.base}/api/v1/attachments/{_id(url)}", timeout=10, headers={"Authorization": f"Token {alice}"}
    ).json()
    assert datetime.fromisoformat(resource["expires_at"].replace("Z", "+00:00")) <= datetime.now(UTC)
    assert "download" not in resource["links"]


@pytest.mark.slow
def test_resume_after_serve_restarts(server, tmp_path):
    alice = server.tokens["alice"]
    data = mp4(2 * MIB + 3)
    path = tmp_path / "clip.mp4"
    path.write_bytes(data)
    store = tmp_path / "urls.json"
    url, _, reached = tus_client(server, alice, path, store, "--stop-at", str(MIB), "--chunk", str(MIB // 2))
    server.restart()
    assert int(head(url, alice).headers["Upload-Offset"]) == reached == MIB
    again, started, done = tus_client(server, alice, path, store, "--chunk", str(MIB // 2))
    assert (again, started, done) == (url, MIB, len(data))
    assert wait_settled(server.base, alice, _id(url))["status"] == "ready"
    assert download(server, alice, _id(url)) == data


@pytest.mark.slow
def test_expired_upload_is_410_and_the_sweeper_removes_its_bytes(tmp_path):
    (tmp_path / "serve").mkdir()
    server = Server(tmp_path / "serve", {"AIRLOCK_URL_SECONDS": {"upload": 3}})
    try:
        alice = server.createuser("alice", "acme")
        path = tmp_path / "clip.mp4"
        path.write_bytes(mp4(MIB))
        stale, _, _ = tus_client(server, alice, path, tmp_path / "urls.json", "--stop-at", str(MIB // 2))
        staged = tmp_path / "serve" / "storage" / ".tus" / _id(stale)
        assert staged.stat().st_size == MIB // 2
        time.sleep(3.5)
        assert head(stale, alice).status_code == 410
        assert patch(stale, alice, b"late", MIB // 2).status_code == 410
        swept = subprocess.run(
            [sys.executable, "manage.py", "sweep", "--json"],
            cwd=ROOT,
            env=server.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert swept.returncode == 0, swept.stderr[-2000:]
        assert '"tus_expired": 1' in swept.stdout
        assert not staged.exists()
        assert head(stale, alice).status_code == 410
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.s3
def _tus_multipart_uploads(s3, bucket: str) -> list[dict]:
    # The pipeline's own copy of a finished upload to its snapshot key (a managed,
    # multipart copy for a large object) may be under way meanwhile: not tus's.
    uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    return [u for u in uploads if "/derivatives/" not in u["Key"]]


def test_on_s3_a_multipart_upload_behind_the_scenes(tmp_path, moto_endpoint):
    import boto3

    from tests.s3.support import moto_bucket_env

    env = moto_bucket_env(moto_endpoint, "tus")
    bucket = env["AIRLOCK_S3_BUCKET"]
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    (tmp_path / "serve").mkdir()
    server = Server(tmp_path / "serve", env)
    try:
        alice = server.createuser("alice", "acme")
        data = mp4(13 * MIB + 5)
        path = tmp_path / "clip.mp4"
        path.write_bytes(data)
        store = tmp_path / "urls.json"
        # 3 MiB chunks: a 5 MiB part goes to S3, the 2 MiB after it wait in the database.
        url, _, reached = tus_client(server, alice, path, store, "--stop-at", str(7 * MIB), "--chunk", str(3 * MIB))
        assert reached == 7 * MIB
        uploads = _tus_multipart_uploads(s3, bucket)
        assert len(uploads) == 1
        parts = s3.list_parts(Bucket=bucket, Key=uploads[0]["Key"], UploadId=uploads[0]["UploadId"])["Parts"]
        assert [p["Size"] for p in parts] == [5 * MIB]
        assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0  # nothing servable yet
        server.restart()
        again, started, done = tus_client(server, alice, path, store, "--chunk", str(3 * MIB))
        assert (again, started, done) == (url, 7 * MIB, len(data))
        assert _tus_multipart_uploads(s3, bucket) == []
        attachment = wait_settled(server.base, alice, _id(url))
        assert attachment["status"] == "ready" and attachment["size"] == len(data)
        assert download(server, alice, _id(url)) == data

        # Termination aborts the multipart upload (its parts are gone from the bucket).
        path.write_bytes(mp4(8 * MIB))
        other, _, _ = tus_client(server, alice, path, tmp_path / "other.json", "--stop-at", str(6 * MIB))
        assert len(_tus_multipart_uploads(s3, bucket)) == 1
        assert (
            requests.delete(
                other, timeout=10, headers={"Tus-Resumable": "1.0.0", "Authorization": f"Token {alice}"}
            ).status_code
            == 204
        )
        assert _tus_multipart_uploads(s3, bucket) == []
        # A small upload (under one part) never needs a multipart upload.
        small = mp4(300_000)
        path.write_bytes(small)
        url3, _, _ = tus_client(server, alice, path, tmp_path / "third.json", "--chunk", "100000")
        assert wait_settled(server.base, alice, _id(url3))["status"] == "ready"
        assert download(server, alice, _id(url3)) == small
    finally:
        server.stop()
