"""One stage table (processing/stages.py): the actors, their queues, the worker's queues and the
pipeline's order all come from it, and the jobs attachments/ sends name its actors."""

from __future__ import annotations

import ast
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
    assert order == ["intake", "scan", "derive"] == list(STAGES)
    assert set(pipeline.WORK) == set(STAGES)
    assert {step.stage for step in STEPS} == set(STAGES)


def test_a_worker_consumes_every_stage_queue_and_the_rescans():
    assert QUEUES == ("intake", "scan", "derive", "rescan")


def _enqueued_actor_names() -> set[str]:
    """Every actor name attachments/ hands to outbox.enqueue as a literal (it may not import processing)."""
    names = set()
    for path in (ROOT / "attachments").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "enqueue"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                names.add(node.args[0].value)
    return names


def test_the_jobs_attachments_sends_name_declared_actors():
    names = _enqueued_actor_names()
    assert {"intake", "scan"} <= names
    broker = dramatiq.get_broker()
    for name in names:
        assert broker.get_actor(name).actor_name == name
