"""Signatures exactly per Standard Webhooks: the reference library (standardwebhooks) verifies ours."""

from __future__ import annotations

import base64
import time
from datetime import UTC

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from webhooks import signing


def test_the_reference_library_verifies_our_signature():
    secret = signing.new_secret()
    body = b'{"type":"attachment.ready","timestamp":"2026-12-01T10:00:00Z","data":{"id":"x","filename":"caf\\u00e9"}}'
    now = int(time.time())
    headers = signing.headers(msg_id="msg_abc", timestamp=now, body=body, secrets=[secret])
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert headers["webhook-id"] == "msg_abc" and headers["webhook-timestamp"] == str(now)
    assert headers["webhook-signature"].startswith("v1,")
    assert Webhook(secret).verify(body, headers)["data"]["filename"] == "café"


def test_a_changed_body_id_or_timestamp_fails_verification():
    secret = signing.new_secret()
    body = b'{"type":"attachment.ready"}'
    now = int(time.time())
    headers = signing.headers(msg_id="msg_1", timestamp=now, body=body, secrets=[secret])
    for tampered_body, tampered in (
        (body + b" ", headers),
        (body, {**headers, "webhook-id": "msg_2"}),
        (body, {**headers, "webhook-timestamp": str(now - 1)}),
    ):
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(tampered_body, tampered)
    with pytest.raises(WebhookVerificationError):
        Webhook(signing.new_secret()).verify(body, headers)


def test_the_same_vector_as_the_reference_signer():
    from datetime import datetime

    secret = "whsec_" + base64.b64encode(bytes(range(32))).decode()
    body = '{"a":1}'
    ts = 1674087231
    ours = signing.signature(
        msg_id="msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", timestamp=ts, body=body.encode(), secrets=[secret]
    )
    theirs = Webhook(secret).sign("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", datetime.fromtimestamp(ts, tz=UTC), body)
    assert ours == theirs


def test_several_secrets_make_space_separated_signatures_each_verifiable():
    old, new = signing.new_secret(), signing.new_secret()
    body = b"{}"
    headers = signing.headers(msg_id="msg_r", timestamp=int(time.time()), body=body, secrets=[new, old])
    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(new).verify(body, headers)
    Webhook(old).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(signing.new_secret()).verify(body, headers)


@pytest.mark.parametrize(
    "secret",
    [
        "",
        "abc",
        "whsec_",
        "whsec_!!!notbase64",
        "whsec_" + base64.b64encode(b"short").decode(),
        "whsec_" + base64.b64encode(b"x" * 65).decode(),
    ],
)
def test_malformed_secrets_are_refused(secret):
    with pytest.raises(signing.InvalidSecret):
        signing.secret_key(secret)


def test_settings_refuse_a_global_url_without_a_valid_secret():
    from django.core.exceptions import ImproperlyConfigured

    from config.settings.env import webhook_secrets

    with pytest.raises(ImproperlyConfigured):
        webhook_secrets(None, url="https://hooks.example.com/x")
    with pytest.raises(ImproperlyConfigured):
        webhook_secrets("whsec_nope", url="https://hooks.example.com/x")
    a, b = signing.new_secret(), signing.new_secret()
    assert webhook_secrets(f"{a} {b}", url="https://hooks.example.com/x") == [a, b]
    assert webhook_secrets(None, url=None) == []
