"""https endpoints: connections go to the checked address, with the URL's name as SNI and a verified certificate."""

from __future__ import annotations

import datetime
import http.server
import ssl
import threading

import pytest

from webhooks import client, urlguard


def _self_signed(tmp_path, name: str):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.fixture
def tls_server(tmp_path):
    cert, key = _self_signed(tmp_path, "localhost")
    seen_cert = cert
    seen = {"sni": [], "posts": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            seen["posts"] += 1
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, ctx: seen["sni"].append(name)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    seen["cert"] = seen_cert
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


def test_an_untrusted_certificate_is_refused_and_sni_is_the_urls_name(tls_server):
    port, seen = tls_server
    target = urlguard.resolve(f"https://localhost:{port}/hooks", private_ok=True, use_cache=False)
    target = urlguard.Target(target.scheme, target.host, target.port, target.path, ("127.0.0.1",))
    with pytest.raises(client.TransportError, match="self-signed certificate|certificate verify failed"):
        client.post(target, body=b"{}", headers={}, timeout=5)
    assert seen["sni"] == ["localhost"]  # connected to 127.0.0.1, introduced as the URL's host
    assert seen["posts"] == 0


def test_a_trusted_certificate_for_the_name_delivers_and_a_wrong_name_does_not(tls_server, monkeypatch):
    port, seen = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", str(seen["cert"]))  # trust this test's CA (OpenSSL's default paths)
    good = urlguard.Target("https", "localhost", port, "/hooks", ("127.0.0.1",))
    assert client.post(good, body=b"{}", headers={}, timeout=5).status == 204
    assert seen["posts"] == 1
    # The same server and address under another name: the certificate does not name it.
    wrong = urlguard.Target("https", "hooks.example.test", port, "/hooks", ("127.0.0.1",))
    with pytest.raises(client.TransportError, match="hostname|match|certificate"):
        client.post(wrong, body=b"{}", headers={}, timeout=5)
    assert seen["posts"] == 1 and seen["sni"][-1] == "hooks.example.test"
