from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from .errors import NotAuthenticated
from .models import Tenant


def tenant_of(user: AbstractBaseUser) -> Tenant:
    membership = getattr(user, "membership", None)
    if membership is None:
        # A user outside every tenant (a bare superuser) can use the admin, not the API.
        raise NotAuthenticated("This user belongs to no tenant.")
    return membership.tenant
