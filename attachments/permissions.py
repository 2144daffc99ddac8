"""The moderator group: view and act on attachments, not users or settings.

The group itself is made by attachments/services/staff.py.
"""

from __future__ import annotations

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
