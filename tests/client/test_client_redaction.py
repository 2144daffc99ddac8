"""The Python client never shows a URL's query, a token or a signature: not in errors, their repr, or logs.

Host apps log exceptions whole, so each test makes an upload fail where it
carries a credential (a signed PUT whose connection drops, a bucket refusing
a presigned PUT and quoting what it signed, a 4xx/5xx on a URL with a token)
and looks for the secret in everything a log line would hold: str and repr of
the error and of every error it was raised from, its details, and the
records logged meanwhile (httpx logs every request's URL at INFO).
"""

from __future__ import annotations

import logging
import traceback
import uuid

import httpx
import pytest

from airlock_client import AirlockError, Client, StorageError, UploadInterrupted, UploadTokenInvalid
from airlock_client.redact import redact, safe_url

TOKEN = "tok3n-" + "s" * 40
SIGNATURE = "5ee" + "d" * 61
CREDENTIAL = "AKIAEXAMPLE%2F20261205%2Fus-east-1%2Fs3%2Faws4_request"
SESSION = "FwoGZXIvYXdzEXAMPLESESSION"
API_TOKEN = "api-" + "k" * 36
SECRETS = (TOKEN, SIGNATURE, "AKIAEXAMPLE", SESSION, API_TOKEN)
BASE = "http://airlock.test"


def _everything_logged(error: BaseException, caplog: pytest.LogCaptureFixture) -> str:
    """What a host's `log.exception(...)` would write, plus the error's attributes and captured records."""
    text = "".join(traceback.format_exception(error))
    chain: BaseException | None = error
    while chain is not None:
        text += f"\n{chain!s}\n{chain!r}\n{getattr(chain, 'details', '')}"
        chain = chain.__cause__ or chain.__context__
    return text + "\n".join(record.getMessage() for record in caplog.records)


def _assert_clean(error: BaseException, caplog: pytest.LogCaptureFixture) -> None:
    text = _everything_logged(error, caplog)
    leaked = [secret for secret in SECRETS if secret in text]
    assert not leaked, f"{leaked} in:\n{text}"


def _intent(upload: dict) -> httpx.Response:
    return httpx.Response(201, json={"id": str(uuid.uuid4()), "status": "awaiting_upload", "upload": upload})


def _client(handler, **kwargs) -> Client:
    return Client(BASE, API_TOKEN, transport=httpx.MockTransport(handler), sleep=lambda s: None, **kwargs)


def _file(tmp_path):
    path = tmp_path / "photo.jpg"
    path.write_bytes(b"\xff\xd8\xff" + b"x" * 100)
    return path


def test_a_signed_put_whose_connection_drops_does_not_show_its_token(tmp_path, caplog):
    signed = f"{BASE}/api/v1/uploads/{uuid.uuid4()}/content?token={TOKEN}"

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return _intent({"method": "PUT", "url": signed, "headers": {}})
        raise httpx.ConnectError(f"connection refused while sending to {request.url}", request=request)

    caplog.set_level(logging.DEBUG)
    with _client(handler, max_retries=1) as client, pytest.raises(UploadInterrupted) as interrupted:
        client.upload(_file(tmp_path), profile="image", sha256=False)
    _assert_clean(interrupted.value, caplog)
    assert "/content?…" in str(interrupted.value)  # still says where it failed, without the query


def test_a_bucket_refusing_a_presigned_put_does_not_echo_its_signature(tmp_path, caplog):
    query = (
        f"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={CREDENTIAL}&X-Amz-Security-Token={SESSION}"
        f"&X-Amz-Signature={SIGNATURE}"
    )
    presigned = f"https://bucket.s3.amazonaws.com/acme/photo.jpg?{query}"
    # What S3 answers to a bad signature: the request it would have signed, query and all.
    refusal = (
        "<?xml version='1.0' encoding='UTF-8'?><Error><Code>SignatureDoesNotMatch</Code>"
        f"<Message>The request signature we calculated does not match; url {presigned}</Message>"
        f"<CanonicalRequest>PUT /acme/photo.jpg {query.replace('&', '&amp;')}</CanonicalRequest></Error>"
    )

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return _intent({"method": "PUT", "url": presigned, "headers": {"x-amz-security-token": SESSION}})
        return httpx.Response(403, text=refusal, headers={"Content-Type": "application/xml"})

    caplog.set_level(logging.DEBUG)
    with _client(handler) as client, pytest.raises(StorageError) as refused:
        client.upload(_file(tmp_path), profile="image", sha256=False)
    assert refused.value.code == "SignatureDoesNotMatch" and refused.value.status == 403
    _assert_clean(refused.value, caplog)


@pytest.mark.parametrize("status", [400, 403, 500, 502])
def test_an_error_answer_on_a_url_with_a_token_does_not_show_the_token(status, tmp_path, caplog):
    signed = f"{BASE}/api/v1/uploads/{uuid.uuid4()}/content?token={TOKEN}"

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return _intent({"method": "PUT", "url": signed, "headers": {}})
        # A proxy's page quoting the request, or a server's error echoing what it was given.
        if status >= 500:
            return httpx.Response(status, text=f"<html>upstream failed for PUT {request.url}</html>")
        return httpx.Response(
            status,
            json={
                "error": {
                    "code": "UPLOAD_TOKEN_INVALID",
                    "message": f"token={TOKEN} is not valid for {request.url}",
                    "details": {"url": str(request.url), "headers": [f"Authorization: Token {API_TOKEN}"]},
                }
            },
        )

    caplog.set_level(logging.INFO)
    with _client(handler, max_retries=0) as client, pytest.raises(AirlockError) as failed:
        client.upload(_file(tmp_path), profile="image", sha256=False)
    if status < 500:
        assert isinstance(failed.value, UploadTokenInvalid)
    assert failed.value.status == status
    _assert_clean(failed.value, caplog)


def test_httpx_request_log_lines_lose_the_query(tmp_path, caplog):
    signed = f"{BASE}/api/v1/uploads/{uuid.uuid4()}/content?token={TOKEN}"

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return _intent({"method": "PUT", "url": signed, "headers": {}})
        return httpx.Response(202, json={"id": "x", "status": "pending"})

    caplog.set_level(logging.INFO, logger="httpx")
    with _client(handler) as client:
        client.upload(_file(tmp_path), profile="image", sha256=False)
    lines = [record.getMessage() for record in caplog.records if record.name == "httpx"]
    assert any("PUT" in line and "/content?…" in line for line in lines), lines
    assert not any(TOKEN in line for line in lines), lines


@pytest.mark.parametrize(
    "text, kept, gone",
    [
        (f"GET {BASE}/d/file?exp=1&kid=a&sig={SIGNATURE}", f"GET {BASE}/d/file?…", SIGNATURE),
        (f"upload_token={TOKEN}; next", "upload_token=[redacted]; next", TOKEN),
        (f"signature={SIGNATURE}&x=1", "signature=[redacted]&x=1", SIGNATURE),
        (f"X-Amz-Credential={CREDENTIAL}&amp;X-Amz-Date=1", "X-Amz-Credential=[redacted]&amp;", "AKIAEXAMPLE"),
        (f"{{'Authorization': 'Token {API_TOKEN}', 'Accept': 'json'}}", "'Accept': 'json'", API_TOKEN),
        (f"x-amz-security-token: {SESSION}\nhost: b", "host: b", SESSION),
        ("the upload token is invalid", "the upload token is invalid", "[redacted]"),
    ],
)
def test_redact(text, kept, gone):
    assert kept in redact(text) and gone not in redact(text)


def test_safe_url_drops_query_and_fragment_only():
    assert safe_url(f"{BASE}/api/v1/tus/abc?token={TOKEN}#x") == f"{BASE}/api/v1/tus/abc?…"
    assert safe_url(f"{BASE}/api/v1/attachments") == f"{BASE}/api/v1/attachments"
