"""One stage table (processing/stages.py): the actors, their queues, the worker's queues and the
pipeline's order all come from it, and every job attachments/jobs.py names is a declared actor."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dramatiq
import pytest

from attachments import jobs
from ops.runtime import QUEUES
from processing import actors, pipeline
from processing.stages import INTAKE, RESCAN_QUEUE, STAGES
from processing.steps.registry import STEPS

ROOT = Path(__file__).resolve().parents[2]


def test_each_stage_has_its_actor_on_its_queue():
    broker = dramatiq.get_broker()
    for stage in STAGES.values():
        actor = broker.get_actor(stage.actor_name)
        assert actor.queue_name == stage.queue
        assert actor is getattr(actors, stage.name)
    assert actors.rederive.queue_name == STAGES["derive"].queue
    assert actors.rescan.queue_name == RESCAN_QUEUE


def test_the_order_runs_from_intake_to_ready_and_every_stage_has_its_work():
    order, stage = [], INTAKE.name
    while stage is not None:
        order.append(stage)
        stage = STAGES[stage].next
    # Intake runs the scan; the scan stage is kept for rows and jobs already at it, and goes on to derive.
    assert order == ["intake", "derive"]
    assert list(STAGES) == ["intake", "scan", "derive"] and STAGES["scan"].next == "derive"
    assert set(pipeline.WORK) == set(STAGES)
    assert {step.stage for step in STEPS} == set(STAGES)


def test_a_worker_consumes_every_stage_queue_and_the_rescans():
    assert QUEUES == ("intake", "scan", "derive", "rescan")


def test_every_job_attachments_sends_is_a_declared_actor_on_its_queue():
    """attachments/jobs.py names the jobs; the apps that run them declare their actors with those names."""
    broker = dramatiq.get_broker()
    assert set(jobs.JOBS) == set(broker.get_declared_actors())
    for job in jobs.JOBS.values():
        assert broker.get_actor(job.actor_name).queue_name == job.queue
    for stage in STAGES.values():
        assert stage.job is jobs.of_step(stage.name)


def test_a_step_that_is_no_stage_has_no_job():
    with pytest.raises(ValueError, match="no pipeline stage named 'rescan'"):
        jobs.of_step("rescan")


def test_a_job_is_recorded_with_its_own_queue_without_asking_the_broker(db, monkeypatch):
    from attachments.services import outbox

    def no_lookup(name):
        raise AssertionError(f"the broker was asked for {name!r}")

    monkeypatch.setattr(dramatiq.get_broker(), "get_actor", no_lookup)
    monkeypatch.setattr(outbox, "_relay_elsewhere", True)  # recorded only: nothing is sent here
    message = outbox.enqueue(jobs.REDERIVE, "x")
    assert (message.actor_name, message.queue_name, message.args) == ("rederive", "derive", ["x"])


def _settings_with(fair_stages: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "AIRLOCK_TENANT_FAIR_STAGES"}
    if fair_stages is not None:
        env["AIRLOCK_TENANT_FAIR_STAGES"] = fair_stages
    code = "import config.settings.base as s; print(','.join(s.AIRLOCK_TENANT_FAIR_STAGES))"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_the_fair_stages_setting_names_the_tables_stages():
    assert _settings_with(None).stdout.strip() == ",".join(STAGES)
    assert _settings_with("Scan").stdout.strip() == "scan"
    refused = _settings_with("scan,rescan")
    assert refused.returncode != 0 and "unknown stage(s) rescan" in refused.stderr
