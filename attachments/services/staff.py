"""Accounts: users made by the operator's `createuser`, and the staff groups they join.

The groups are rows like any other, made here on first use: the moderator group
at serve's start (its permissions follow MODERATOR_CODENAMES as the code
changes), the platform-staff flag group when someone first joins it. The
permission checks (attachments/permissions.py, attachments/staff_scope.py) only
read them.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import transaction

from ..permissions import MODERATOR_CODENAMES, MODERATOR_GROUP
from ..staff_scope import PLATFORM_STAFF_GROUP
from .tenants import tenant_member_add
from .tokens import api_token_issue


def moderator_group_ensure() -> Group:
    """The moderator group, made if missing, holding every permission of MODERATOR_CODENAMES."""
    group, _ = Group.objects.get_or_create(name=MODERATOR_GROUP)
    group.permissions.add(*Permission.objects.filter(codename__in=MODERATOR_CODENAMES))
    return group


def platform_staff_group_ensure() -> Group:
    """The platform-staff group, made if missing: only a flag (cross-tenant view), it grants no permission."""
    group, _ = Group.objects.get_or_create(name=PLATFORM_STAFF_GROUP)
    return group


def user_create(
    *,
    name: str,
    tenant_slug: str,
    password: str | None,
    email: str = "",
    staff: bool = False,
    superuser: bool = False,
    moderator: bool = False,
    platform: bool = False,
) -> tuple[Any, str]:
    """A user in `tenant_slug` (made if new), in the groups asked for; returns it and its API token's key."""
    with transaction.atomic():
        user = get_user_model().objects.create_user(username=name, email=email, password=password)
        user.is_staff = staff
        user.is_superuser = superuser
        user.save()
        tenant_member_add(user=user, tenant_slug=tenant_slug)
        if moderator:
            user.groups.add(moderator_group_ensure())
        if platform:
            user.groups.add(platform_staff_group_ensure())
        return user, api_token_issue(user=user)
