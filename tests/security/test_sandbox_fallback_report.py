"""Where Landlock is missing (or the fallback is forced), /readyz and the fork server's start
log say the filesystem is confined by the mount namespace instead, and nothing is missing."""

from __future__ import annotations

import logging
import os

import pytest

from processing.sandbox import confine, runner, shutdown

FALLBACK = "uid,nnp,seccomp,mountns,nproc,subreaper"
ALL_FALLBACK = "uid+nnp+seccomp+mountns+nproc+subreaper"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="CI and this machine run as root; the uid layer needs it")


def _sandbox_check(client) -> dict:  # type: ignore[no-untyped-def]
    return client.get("/readyz").json()["checks"]["sandbox"]


@root_only
def test_readyz_reports_the_fallback_when_the_kernel_has_no_landlock(client, db, monkeypatch) -> None:
    monkeypatch.setattr(confine, "landlock_abi", lambda: 0)  # as on a kernel older than 5.13
    check = _sandbox_check(client)
    assert (check["confinement"], check["missing"]) == (ALL_FALLBACK, [])


@root_only
def test_readyz_and_the_start_log_report_a_forced_fallback(client, db, monkeypatch, caplog) -> None:
    monkeypatch.setenv(confine.CONFINE_ENV, FALLBACK)
    check = _sandbox_check(client)
    assert (check["confinement"], check["missing"]) == (ALL_FALLBACK, [])
    shutdown()
    try:
        with caplog.at_level(logging.INFO, logger=runner.__name__):
            assert runner.confinement() == ALL_FALLBACK
        started = [r for r in caplog.records if r.name == runner.__name__ and "fork server" in r.getMessage()]
        assert started and started[-1].confinement == ALL_FALLBACK
    finally:
        shutdown()  # the next test gets a server with the default layers
