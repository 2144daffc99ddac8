"""API tokens: stored as digests only, the Token scheme only, old plain-text tokens carried over."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from attachments.models import ApiToken


def test_createuser_token_authenticates_and_is_not_stored(db, capsys, api):
    call_command("createuser", "carol", "--tenant", "acme")
    key = capsys.readouterr().out.strip().splitlines()[-1]
    client = api()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/attachments").status_code == 200
    # Nowhere in the database in plain text: not in our table, not in DRF's.
    row = ApiToken.objects.get(user__username="carol")
    assert key not in (row.digest, row.prefix) and row.prefix == key[:8]
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0


def test_a_digest_is_not_a_credential(alice, api):
    client = api()
    client.credentials(HTTP_AUTHORIZATION=f"Token {ApiToken.objects.get(user=alice).digest}")
    assert client.get("/api/v1/attachments").status_code == 401


def test_bearer_is_refused_with_the_right_scheme_named(alice, api):
    client = api()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.api_token}")
    response = client.get("/api/v1/attachments")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Token")
    assert "Authorization: Token" in response.json()["error"]["message"]


def test_deleting_a_token_revokes_it(alice, api):
    assert api(alice).get("/api/v1/attachments").status_code == 200
    ApiToken.objects.filter(user=alice).delete()
    assert api(alice).get("/api/v1/attachments").status_code == 401


@pytest.mark.django_db(transaction=True)
def test_migration_keeps_existing_plain_text_tokens_working(api):
    """An install from before 0008 has DRF tokens in plain text: after migrating they still work."""
    before = [("attachments", "0007_lean_indexes")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state([*before, ("authtoken", "0004_alter_tokenproxy_options")]).apps
    tenant = old.get_model("attachments", "Tenant").objects.create(slug="legacy")
    user = old.get_model("auth", "User").objects.create(username="legacy-user")
    old.get_model("attachments", "Membership").objects.create(user=user, tenant=tenant)
    key = "0123456789abcdef0123456789abcdef01234567"
    old.get_model("authtoken", "Token").objects.create(key=key, user=user)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    client = api()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/attachments").status_code == 200
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0


def test_bearer_on_a_public_endpoint_is_just_anonymous(db, api):
    """The schema is public: a client sending its storage-events Bearer token still gets it."""
    client = api()
    client.credentials(HTTP_AUTHORIZATION="Bearer storage-events-token")
    assert client.get("/api/v1/schema?format=json").status_code == 200
