"""One stage table (processing/stages.py): the actors, their queues, the worker's queues and the
pipeline's order all come from it, and the jobs attachments/ sends name its actors."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import dramatiq

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


def _enqueued_actor_names() -> set[str]:
    """Every actor name attachments/ hands to outbox.enqueue as a literal (it may not import processing)."""
    names = set()
    for path in (ROOT / "attachments").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "enqueue"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names.add(node.args[0].value)
    return names


def test_the_jobs_attachments_sends_name_declared_actors():
    names = _enqueued_actor_names()
    assert "intake" in names  # what follows intake is named by the pipeline (attachment_begin's next_step)
    broker = dramatiq.get_broker()
    for name in names:
        assert broker.get_actor(name).actor_name == name


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
