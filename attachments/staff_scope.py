"""Which tenants a staff member may see and act on in the admin.

Platform staff (superusers, and members of the `platform-staff` group) see every
tenant. Every other staff member — a moderator created with
`createuser NAME --tenant T --moderator` — is bound to the tenant of their
membership and sees only its attachments, their history and dead letters, and
its numbers on the dashboard; with no membership they see nothing. Scoping is
done on querysets, so list pages, object pages, bulk actions and per-object
actions all go through the same filter.
"""

from __future__ import annotations

from django.db.models import QuerySet

# Membership is only a flag (cross-tenant view): permissions still come from `moderator` or others.
# The group is made by attachments/services/staff.py.
PLATFORM_STAFF_GROUP = "platform-staff"


def is_platform_staff(user) -> bool:
    cached = getattr(user, "_airlock_platform_staff", None)
    if cached is None:
        cached = bool(user.is_superuser or user.groups.filter(name=PLATFORM_STAFF_GROUP).exists())
        user._airlock_platform_staff = cached  # once per request: the user object lives as long
    return cached


def staff_tenant_id(user) -> int | None:
    """The one tenant a tenant-scoped staff member moderates, or None (platform staff, or no tenant)."""
    if is_platform_staff(user):
        return None
    membership = getattr(user, "membership", None)
    return membership.tenant_id if membership is not None else None


def scoped(queryset: QuerySet, user, *, tenant_path: str = "tenant") -> QuerySet:
    """`queryset` cut down to what `user` may see; `tenant_path` leads from its model to the Tenant."""
    if is_platform_staff(user):
        return queryset
    tenant_id = staff_tenant_id(user)
    if tenant_id is None:
        return queryset.none()
    return queryset.filter(**{f"{tenant_path}_id": tenant_id})


class PlatformStaffOnly:
    """ModelAdmin mixin for platform-wide controls (the sweeper's brakes and runs): hidden from tenant staff."""

    def has_module_permission(self, request):
        return is_platform_staff(request.user) and super().has_module_permission(request)

    def has_view_permission(self, request, obj=None):
        return is_platform_staff(request.user) and super().has_view_permission(request, obj)

    def has_change_permission(self, request, obj=None):
        return is_platform_staff(request.user) and super().has_change_permission(request, obj)
