"""`manage.py sweep`: parse, call the service, print its report."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from attachments.models import Attachment, Lifecycle
from sweeper.control import sweeper_control_set
from sweeper.models import SweepRun
from tests.sweeper.support import all_keys, files_of, make_attachment

pytestmark = pytest.mark.django_db


@pytest.fixture
def expired(alice):
    return [make_attachment(alice, created_at=timezone.now() - timedelta(days=8)) for _ in range(3)]


def _sweep(*args: str) -> str:
    out = StringIO()
    call_command("sweep", *args, stdout=out)
    return out.getvalue()


def test_sweep_prints_a_summary_and_deletes(expired):
    output = _sweep()
    assert "sweep normal: 3 selected, 3 rows marked deleted, deleted 9 objects, 0 errors" in output
    assert all(files_of(a) == set() for a in expired)
    assert SweepRun.objects.get().trigger == "command"


def test_sweep_dry_run_lists_every_key(expired):
    output = _sweep("--dry-run")
    for attachment in expired:
        for key in all_keys(attachment):
            assert f"would delete {key}" in output
        assert len(files_of(attachment)) == 3
    assert not Attachment.objects.filter(lifecycle=Lifecycle.DELETED).exists()


def test_sweep_json_and_limit(expired):
    data = json.loads(_sweep("--json", "--limit", "2"))
    assert data["mode"] == "normal" and data["deleted"] == 2 and data["stopped"] == "limit"
    assert data["run_id"] == SweepRun.objects.get().pk


def test_sweep_under_the_killswitch_says_so(expired):
    sweeper_control_set(killswitch=True, actor="test")
    assert "sweep killswitch: nothing deleted" in _sweep()
    assert all(len(files_of(a)) == 3 for a in expired)


def test_sweep_refuses_a_silly_limit():
    with pytest.raises(CommandError):
        _sweep("--limit", "0")
