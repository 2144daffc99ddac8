"""Sweeper tests: live-service markers fail (never skip) when the service is missing."""

from __future__ import annotations

import pytest

from tests.sweeper.support import clear_redis_locks, require_live_services


@pytest.fixture(autouse=True)
def _live_services(request: pytest.FixtureRequest) -> None:
    require_live_services(request)
    clear_redis_locks()


@pytest.fixture(autouse=True)
def _no_brake_overrides(settings) -> None:
    """The environment may pin the brakes; tests start from the database's word."""
    settings.AIRLOCK_SWEEPER_KILLSWITCH = None
    settings.AIRLOCK_SWEEPER_DRY_RUN = None
