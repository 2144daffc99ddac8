"""Tenants and who belongs to them: the rows a new tenant or member starts with."""

from __future__ import annotations

from typing import Any

from ..models import Membership, Tenant, TenantUsage


def tenant_usage_open(*, tenant_id: Any) -> None:
    """A tenant's quota counter (attachments/services/quotas.py) at zero, unless it has one already."""
    TenantUsage.objects.get_or_create(tenant_id=tenant_id)


def tenant_member_add(*, user: Any, tenant_slug: str) -> Tenant:
    """Put `user` in the tenant `tenant_slug`, creating the tenant (named for its slug) when it is new."""
    tenant, _ = Tenant.objects.get_or_create(slug=tenant_slug, defaults={"name": tenant_slug})
    Membership.objects.create(user=user, tenant=tenant)
    return tenant
