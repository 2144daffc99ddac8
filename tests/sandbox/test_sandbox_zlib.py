"""Which zlib the decoders inflate with: zlib-ng when built, the system's when asked, never a guess."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from processing.sandbox import SandboxUnavailable, runner, shutdown
from processing.sandbox.runner import BUILT_ZLIB_DIR, ZLIB_DIR_ENV, decoder_zlib_version

from .helpers import noisy_png, outcome, with_invalid_deflate


@pytest.fixture(autouse=True)
def _fresh_server():
    shutdown()  # the environment below only applies to a server started after it
    yield
    shutdown()


def _server_maps() -> str:
    assert runner._server is not None
    return Path(f"/proc/{runner._server.proc.pid}/maps").read_text()


def test_jobs_inflate_with_the_built_zlib_ng(run, monkeypatch: pytest.MonkeyPatch) -> None:
    assert (BUILT_ZLIB_DIR / "libz.so.1").is_file(), "run scripts/build-zlib-ng.sh (scripts/bootstrap.sh does)"
    monkeypatch.delenv(ZLIB_DIR_ENV, raising=False)
    assert "zlib-ng" in decoder_zlib_version()
    assert str(BUILT_ZLIB_DIR.resolve()) in _server_maps()
    result = run("image", noisy_png())
    assert outcome(result) == "ready" and result.data["thumbnail"] == {"width": 256, "height": 144}
    assert outcome(run("image", with_invalid_deflate(noisy_png()))) == "rejected:corrupt"
    assert "zlib-ng" not in zlib.ZLIB_RUNTIME_VERSION  # the worker itself keeps the system zlib


def test_system_keeps_the_system_zlib(run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ZLIB_DIR_ENV, "system")
    assert decoder_zlib_version() == zlib.ZLIB_RUNTIME_VERSION
    assert str(BUILT_ZLIB_DIR.resolve()) not in _server_maps()
    assert outcome(run("image", noisy_png())) == "ready"
    assert outcome(run("image", with_invalid_deflate(noisy_png()))) == "rejected:corrupt"


def test_a_named_directory_without_the_library_is_an_infrastructure_error(
    run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ZLIB_DIR_ENV, str(tmp_path))
    with pytest.raises(SandboxUnavailable, match=ZLIB_DIR_ENV):
        run("image", noisy_png())
    assert runner._server is None  # nothing half-started is left behind
