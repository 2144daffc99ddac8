"""Helpers the tests share: sample files, upload flows, running the pipeline."""

from __future__ import annotations

import io
import time
import uuid
import zipfile

EICAR = b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$" + b"EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"


def client_for(user=None):
    from rest_framework.test import APIClient

    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {user.api_token}")
    return client


# --- sample files, built small and real ---------------------------------------


def make_staff(name: str, *extra: str):
    """A moderator of tenant acme made the documented way (`manage.py createuser`), password `pw-<name>`."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("createuser", name, "--tenant", "acme", "--moderator", "--password", f"pw-{name}", *extra)
    return get_user_model().objects.get(username=name)


def jpeg_bytes(size=(64, 48), color=(200, 30, 30), exif=None) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    image = Image.new("RGB", size, color)
    if exif is not None:
        image.save(buf, "JPEG", exif=exif)
    else:
        image.save(buf, "JPEG")
    return buf.getvalue()


def png_bytes(size=(40, 30)) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGBA", size, (0, 128, 255, 255)).save(buf, "PNG")
    return buf.getvalue()


def pdf_bytes(text: str = "Hello Airlock searchable words", pages: int = 1) -> bytes:
    """A minimal valid PDF with real text on each page."""
    objects = []
    page_ids = [3 + 2 * i for i in range(pages)]
    font_id = 3 + 2 * pages
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{pid} 0 R" for pid in page_ids)
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode())
    for i, pid in enumerate(page_ids):
        content = f"BT /F1 18 Tf 50 700 Td ({text} {i + 1}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {pid + 1} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return pdf_document(objects)


def pdf_document(objects: list[bytes]) -> bytes:
    """Serialise PDF object bodies (object 1 is the catalog) with a correct xref table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def zip_bytes(entries: dict[str, bytes] | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in (entries or {"readme.txt": b"hello " * 10}).items():
            zf.writestr(name, data)
    return buf.getvalue()


# --- driving uploads and the pipeline ------------------------------------------


def create_intent(client, *, profile="image", filename="cat.jpg", size=100, content_type="image/jpeg"):
    return client.post(
        "/api/v1/uploads",
        {"profile": profile, "filename": filename, "size": size, "content_type": content_type},
        format="json",
    )


def put_bytes(url: str, data: bytes, *, content_type="application/octet-stream"):
    """PUT to an upload URL through the test client (the token is the only credential)."""
    from urllib.parse import urlsplit

    from rest_framework.test import APIClient

    parts = urlsplit(url)
    return APIClient().generic("PUT", f"{parts.path}?{parts.query}", data, content_type=content_type)


def land_unchecked(row, data: bytes) -> None:
    """`data` written straight into row's storage key, as a store that neither bounds nor checks
    a body would let it land, then announced the way every path announces it (object_arrived)."""
    from attachments.storage import get_gateway
    from attachments.uploads.services.uploads import object_arrived

    get_gateway().write_chunks(row.storage_key, [data], content_type="image/jpeg")
    object_arrived(
        key=row.storage_key,
        size=len(data),
        source="test",
        dedupe_key=f"test:{row.storage_key}",
        event_name="ObjectCreated:Put",
    )


def upload(client, data: bytes, *, profile="image", filename="cat.jpg", content_type="image/jpeg"):
    """Intent + PUT; returns the attachment id."""
    intent = create_intent(client, profile=profile, filename=filename, size=len(data), content_type=content_type)
    assert intent.status_code == 201, intent.content
    response = put_bytes(intent.json()["upload"]["url"], data, content_type=content_type)
    assert response.status_code == 202, response.content
    return intent.json()["id"]


def run_pipeline(attachment_id) -> str:
    """Run every step inline, in order, as the actors would; returns the final status."""
    from processing import pipeline

    pipeline.start_and_intake(uuid.UUID(str(attachment_id)))
    return run_remaining_stages(attachment_id)


def run_remaining_stages(attachment_id) -> str:
    """Run the stages a file in processing has left, inline, in order; returns the final status."""
    from attachments.models import Attachment
    from processing import pipeline

    for _ in range(5):
        attachment = Attachment.objects.get(pk=attachment_id)
        if attachment.status != "processing":
            return attachment.status
        pipeline.run_stage(attachment.pk, attachment.lease_token, attachment.step)
    return Attachment.objects.get(pk=attachment_id).status


def wait_for_status(attachment_id, statuses=("ready", "rejected", "failed"), timeout=30.0) -> str:
    from attachments.models import Attachment

    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        status = Attachment.objects.filter(pk=attachment_id).values_list("status", flat=True).first()
        if status in statuses:
            return status
        time.sleep(0.05)
    raise AssertionError(f"{attachment_id} still {status} after {timeout}s")
