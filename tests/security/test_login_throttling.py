"""Password logins lock out after repeated failures, per (username, client IP) and per client IP; staff can undo it."""

from __future__ import annotations

import pytest
from django.test import Client

LOGIN = "/admin/login/"


def _login(username: str, password: str, ip: str = "10.0.0.1", **headers):
    client = Client(REMOTE_ADDR=ip, **headers)
    response = client.post(LOGIN, {"username": username, "password": password, "next": "/admin/"})
    return client, response


def _signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


@pytest.fixture
def superuser(make_user):
    user = make_user("root", tenant="ops", staff=True)
    user.is_superuser = True
    user.save()
    return user


def test_forty_wrong_passwords_then_the_right_one_is_refused(moderator_user, api):
    for _ in range(40):
        _, response = _login("warden", "guess")
        assert response.status_code in (200, 429)
    client, response = _login("warden", "pw-warden")
    assert response.status_code == 429
    assert not _signed_in(client)
    # API tokens are another credential: they are not locked with the password.
    assert api(moderator_user).get("/api/v1/attachments").status_code == 200


def test_wrong_passwords_from_elsewhere_never_lock_the_owner_out(moderator_user, superuser, settings):
    """Anyone can type an admin's username: that must not lock the admin out from their own address."""
    for n in range(settings.AXES_FAILURE_LIMIT * 3):
        _login("warden", "guess", ip="10.1.0.1")
        _login("root", "guess", ip=f"10.1.1.{n + 1}")  # and spread over many addresses
    client, response = _login("warden", "guess", ip="10.1.0.1")
    assert response.status_code == 429  # the pair that guessed is locked
    client, response = _login("warden", "pw-warden", ip="10.2.0.1")
    assert response.status_code == 302 and _signed_in(client)
    client, response = _login("root", "pw-root", ip="10.2.0.2")
    assert response.status_code == 302 and _signed_in(client)


def test_an_address_is_locked_for_every_username_at_its_own_limit(moderator_user, make_user, settings):
    settings.AIRLOCK_LOGIN_LIMITS = settings.AIRLOCK_LOGIN_LIMITS.replace(address_failures=12)
    assert settings.AIRLOCK_LOGIN_LIMITS.address_failures > settings.AXES_FAILURE_LIMIT
    for n in range(settings.AIRLOCK_LOGIN_LIMITS.address_failures - 1):
        _login(f"someone-{n}", "guess", ip="10.3.0.1")  # one failure per username: no pair is near its limit
    client, response = _login("warden", "pw-warden", ip="10.3.0.1")
    assert response.status_code == 302 and _signed_in(client)  # below the address's limit (a shared NAT)
    _login("someone-else", "guess", ip="10.3.0.1")
    client, response = _login("warden", "pw-warden", ip="10.3.0.1")
    assert response.status_code == 429 and not _signed_in(client)
    client, response = _login("warden", "pw-warden", ip="10.3.0.2")  # the user is not locked elsewhere
    assert response.status_code == 302 and _signed_in(client)


def test_a_few_failures_do_not_lock(moderator_user, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        _login("warden", "guess")
    client, response = _login("warden", "pw-warden")
    assert response.status_code == 302 and _signed_in(client)


def test_lockouts_are_listed_in_the_admin_and_deleting_them_unlocks(moderator_user, superuser, settings):
    from axes.models import AccessAttempt

    for _ in range(settings.AXES_FAILURE_LIMIT + 2):
        _login("warden", "guess", ip="10.4.0.1")
    assert _login("warden", "pw-warden", ip="10.4.0.1")[1].status_code == 429

    staff = Client()
    staff.force_login(superuser)
    listing = staff.get("/admin/axes/accessattempt/")
    assert listing.status_code == 200 and b"warden" in listing.content
    attempt = AccessAttempt.objects.get(username="warden")
    response = staff.post(f"/admin/axes/accessattempt/{attempt.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    client, response = _login("warden", "pw-warden", ip="10.4.0.1")
    assert response.status_code == 302 and _signed_in(client)


def test_behind_a_trusted_proxy_the_forwarded_address_counts(moderator_user, settings):
    settings.AIRLOCK_TRUSTED_PROXY_HOPS = 1
    settings.AIRLOCK_LOGIN_LIMITS = settings.AIRLOCK_LOGIN_LIMITS.replace(address_failures=8)
    for n in range(settings.AIRLOCK_LOGIN_LIMITS.address_failures):
        # Same proxy, one attacker; the spoofed left-most entries change every time.
        _login(f"x-{n}", "guess", ip="192.168.0.9", HTTP_X_FORWARDED_FOR=f"1.2.3.{n}, 203.0.113.7")
    _, response = _login("warden", "pw-warden", ip="192.168.0.9", HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert response.status_code == 429
    client, response = _login("warden", "pw-warden", ip="192.168.0.9", HTTP_X_FORWARDED_FOR="198.51.100.1")
    assert response.status_code == 302 and _signed_in(client)  # another client behind the same proxy


@pytest.fixture
def moderator_user(make_user):
    from attachments.services.staff import moderator_group_ensure

    user = make_user("warden", tenant="acme", staff=True)
    user.groups.add(moderator_group_ensure())
    return user
