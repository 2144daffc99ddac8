"""A host's service token acting for one of its people."""

from __future__ import annotations


def as_subject(user, subject: str | None):
    """An API client with `user`'s token, sending `Airlock-Subject: subject` (None: no header)."""
    from rest_framework.test import APIClient

    client = APIClient()
    headers = {"HTTP_AUTHORIZATION": f"Token {user.api_token}"}
    if subject is not None:
        headers["HTTP_AIRLOCK_SUBJECT"] = subject
    client.credentials(**headers)
    return client
