"""The moderator group: view and act on attachments, not users or settings."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission

MODERATOR_GROUP = "moderator"
MODERATOR_CODENAMES = (
    "view_attachment",
    "change_attachment",
    "moderate_attachment",
    "view_transitionlog",
    "view_tombstone",
    "view_deadletter",
    "change_deadletter",
    "view_derivative",
    # The sweeper's brakes (killswitch, dry run) are an operational control that
    # moderators must be able to pull; Django users and settings stay out of reach.
    "view_sweepercontrol",
    "change_sweepercontrol",
    "view_sweeprun",
    "view_reconcilerun",
)


def ensure_moderator_group() -> Group:
    group, _ = Group.objects.get_or_create(name=MODERATOR_GROUP)
    perms = Permission.objects.filter(codename__in=MODERATOR_CODENAMES)
    group.permissions.add(*perms)
    return group
