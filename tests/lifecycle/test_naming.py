"""naming.parse_key reads back every key the builders mint, and nothing else."""

import uuid

import pytest

from attachments.naming import ParsedKey, derivative_key, original_key, parse_key, quarantine_key

PK = uuid.UUID("0b7e2c1a-5d1f-4c5e-9a3b-2f6d8e9a1c40")


def test_an_original_key_reads_back():
    key = original_key(tenant_slug="acme", profile="image", attachment_id=PK)
    assert parse_key(key) == ParsedKey(tenant_slug="acme", attachment_id=PK, profile="image")


def test_a_derivative_key_reads_back():
    key = derivative_key(tenant_slug="acme", attachment_id=PK, kind="thumbnail", ext="webp")
    assert parse_key(key) == ParsedKey(tenant_slug="acme", attachment_id=PK, derivative="thumbnail.webp")


def test_a_quarantined_key_reads_back_as_quarantined():
    key = quarantine_key(original_key(tenant_slug="acme", profile="document", attachment_id=PK))
    assert parse_key(key) == ParsedKey(tenant_slug="acme", attachment_id=PK, profile="document", quarantined=True)


@pytest.mark.parametrize(
    "key",
    [
        f"elsewhere/{PK}",
        f"tenants/acme/{PK}",
        "tenants/acme/image/not-a-uuid",
        f"tenants/acme/image/{str(PK).upper()}",  # the builders write the canonical form only
        f"tenants/acme/image/{PK.hex}",
        f"tenants//image/{PK}",
        f"tenants/acme/image/{PK}/extra",
        f"tenants/acme/derivatives/{PK}/",
        f"tenants/acme/derivatives/{PK}/a/b",
        f"quarantine/quarantine/tenants/acme/image/{PK}",
        "",
    ],
)
def test_keys_of_no_known_layout_are_refused(key):
    assert parse_key(key) is None
