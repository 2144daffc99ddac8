"""Sweeper tests: live-service markers fail (never skip) when the service is missing."""

from tests.sweeper.support import live_services_and_clean_locks, no_brake_overrides  # noqa: F401 (autouse fixtures)
