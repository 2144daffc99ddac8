"""An upload whose body ends before its Content-Length (the client went away) is refused and keeps its URL."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest

from attachments.models import Attachment
from tests.support import create_intent, jpeg_bytes


def _raw_put(base: str, path: str, body: bytes, declared: int) -> bytes:
    host, port = urlsplit(base).hostname, urlsplit(base).port
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(
            f"PUT {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: {declared}\r\n"
            f"Content-Type: image/jpeg\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        sock.shutdown(socket.SHUT_WR)  # the client is gone before the last byte
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


@pytest.mark.django_db(transaction=True)
def test_a_body_cut_short_is_refused_and_the_url_still_works(live_server, alice, api):
    data = jpeg_bytes((200, 150))
    intent = create_intent(api(alice), size=len(data)).json()
    parts = urlsplit(intent["upload"]["url"])
    path = f"{parts.path}?{parts.query}"

    reply = _raw_put(live_server.url, path, data[: len(data) // 2], declared=len(data))
    assert reply.split(b"\r\n", 1)[0].split()[1] == b"400"
    row = Attachment.objects.get(pk=intent["id"])
    assert row.uploaded_at is None and row.status == "pending"

    reply = _raw_put(live_server.url, path, data, declared=len(data))
    assert reply.split(b"\r\n", 1)[0].split()[1] == b"202"
    assert Attachment.objects.get(pk=intent["id"]).uploaded_at is not None
