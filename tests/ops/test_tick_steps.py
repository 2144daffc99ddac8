"""The scheduler tick (ops/runtime.py) runs each app's periodic step on its own: one failing never skips another."""

from __future__ import annotations

import pytest


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("failing", ["renditions", "webhooks"])
def test_a_failing_tick_step_does_not_skip_the_others(monkeypatch, failing):
    from attachments.services import renditions
    from ops.runtime import run_ticks_once
    from processing.rescan import jobs as rescan_jobs
    from webhooks.services import tick

    ran: list[str] = []

    def step(name: str):
        def run(*args, **kwargs):
            ran.append(name)
            if name == failing:
                raise RuntimeError(f"{name} is down")

        return run

    monkeypatch.setattr(renditions, "renditions_redrive", step("renditions"))
    monkeypatch.setattr(tick, "run_tick", step("webhooks"))
    monkeypatch.setattr(rescan_jobs, "rescan_tick", step("rescan"))
    run_ticks_once()
    assert ran == ["renditions", "webhooks", "rescan"]
