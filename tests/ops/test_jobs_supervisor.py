"""serve's job-process supervisor starts its child without a pipe a forked web process could inherit.

Popen's fork + exec waits on a pipe until the child exec'd; a web process
forked meanwhile by serve's main thread kept the pipe's write end open, so the
supervisor never returned from Popen and never replaced a killed job process.
"""

from __future__ import annotations

import os
import subprocess
import sys

from ops.management.commands import serve


def test_the_job_process_is_spawned_without_a_start_up_pipe(monkeypatch):
    pipes = []
    real_pipe = os.pipe

    def counted_pipe():
        pipes.append(1)
        return real_pipe()

    monkeypatch.setattr(os, "pipe", counted_pipe)
    proc = serve.spawn([sys.executable, "-c", "import sys; sys.exit(7)"])
    assert proc.wait(timeout=30) == 7
    assert pipes == [], "a start-up pipe: a web process forked meanwhile would hold it open"


def test_the_default_popen_would_have_opened_one(monkeypatch):
    """The check above can fail: Popen's fork + exec path does open the pipe."""
    pipes = []
    real_pipe = os.pipe

    def counted_pipe():
        pipes.append(1)
        return real_pipe()

    monkeypatch.setattr(os, "pipe", counted_pipe)
    proc = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.DEVNULL)
    assert proc.wait(timeout=30) == 0
    assert pipes
