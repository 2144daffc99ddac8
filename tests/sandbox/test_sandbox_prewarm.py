"""The spare's idle-time warm-up: our own samples only, never in a request's way."""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator

import pytest
from PIL import Image

from processing.sandbox import prewarm


@pytest.fixture
def request_pipe() -> Iterator[tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    yield read_fd, write_fd
    os.close(read_fd)
    os.close(write_fd)


def _recording_steps(monkeypatch: pytest.MonkeyPatch, fail_at: int | None = None) -> list[int]:
    ran: list[int] = []

    def step(n: int) -> Callable[[Callable[[], bool]], None]:
        def run(waiting: Callable[[], bool]) -> None:
            ran.append(n)
            if n == fail_at:
                raise MemoryError("warm-up ran out of memory")

        return run

    monkeypatch.setattr(prewarm, "PASSES", (step(0), step(1), step(2)))
    return ran


def test_warm_up_runs_every_step_while_no_request_waits(
    request_pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = _recording_steps(monkeypatch)
    prewarm.prepare(request_pipe[0])
    assert ran == [0, 1, 2]


def test_a_waiting_request_skips_the_warm_up(
    request_pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = _recording_steps(monkeypatch)
    os.write(request_pipe[1], b"{}")
    prewarm.prepare(request_pipe[0])
    assert ran == []
    assert os.read(request_pipe[0], 16) == b"{}"  # the request itself is left for the job


def test_a_failing_step_ends_the_warm_up_quietly(
    request_pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = _recording_steps(monkeypatch, fail_at=1)
    prewarm.prepare(request_pipe[0])
    assert ran == [0, 1]


def test_warm_samples_go_through_the_image_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    tiny = Image.new("RGB", (128, 96), "teal")
    samples = []
    for fmt in ("JPEG", "PNG"):
        buf = io.BytesIO()
        tiny.save(buf, fmt)
        samples.append(buf.getvalue())
    monkeypatch.setattr(prewarm, "SAMPLES", samples)
    rendered = []
    real_render = prewarm.images.render
    monkeypatch.setattr(
        prewarm.images, "render", lambda raw, bounds: rendered.append(real_render(raw, bounds))
    )
    prewarm.warm(lambda: False)
    assert [data["format"] for data, _, _ in rendered] == ["JPEG", "PNG"]
    rendered.clear()
    prewarm.warm(lambda: True)  # a request is waiting: not even the first sample
    assert rendered == []


def test_heap_prefault_stops_between_chunks_for_a_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(prewarm._libc, "mallopt", lambda *_: 1)  # keep this process's malloc
    checks = []

    def waiting() -> bool:
        checks.append(None)
        return len(checks) > 1  # a request arrives after the first chunk

    prewarm.prefault_heap(waiting)
    assert len(checks) == 2
