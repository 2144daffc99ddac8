"""`Airlock-Subject`: a service token acts for one of the host's people; files record whom they are for."""

import pytest

from attachments.models import Attachment, TransitionLog
from tests.support import client_for, create_intent

pytestmark = pytest.mark.django_db


def test_the_header_names_the_files_subject_and_the_audit_records_it(alice):
    client = client_for(alice)
    client.credentials(HTTP_AUTHORIZATION=f"Token {alice.api_token}", HTTP_AIRLOCK_SUBJECT="user-42")
    response = create_intent(client)
    assert response.status_code == 201, response.content
    assert response.json()["subject"] == "user-42"
    row = Attachment.objects.get(pk=response.json()["id"])
    assert row.subject == "user-42" and row.owner_id == alice.pk
    intent = TransitionLog.objects.get(attachment=row, transition="intent")
    assert intent.details["subject"] == "user-42"


def test_without_the_header_the_account_is_the_subject(alice):
    response = create_intent(client_for(alice))
    assert response.status_code == 201
    assert response.json()["subject"] == "alice"


@pytest.mark.parametrize("bad", ["", " lead", "trail ", "x" * 129, "tab\there", "é"])
def test_a_malformed_subject_is_a_validation_error_and_writes_nothing(alice, bad):
    client = client_for(alice)
    client.credentials(HTTP_AUTHORIZATION=f"Token {alice.api_token}", HTTP_AIRLOCK_SUBJECT=bad)
    response = create_intent(client)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert "Airlock-Subject" in response.json()["error"]["details"]
    assert not Attachment.objects.exists()


def test_the_longest_subject_is_accepted(alice):
    client = client_for(alice)
    client.credentials(HTTP_AUTHORIZATION=f"Token {alice.api_token}", HTTP_AIRLOCK_SUBJECT="s" * 128)
    assert create_intent(client).status_code == 201
