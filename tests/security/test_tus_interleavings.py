"""Property: however PATCH, HEAD, DELETE, the sweep and completion interleave, no byte lands after completion.

Hypothesis writes programs of tus operations on one upload. A PATCH's body is a
generator, and the operations nested in it run between two of its chunks (on the
same thread, so each interleaving is exact and replayable); a step may move the
clock past the claim's staleness or the upload's expiry. `object_arrived` is
where intake starts: the digest of the stored bytes there is what a scan would
record. After every step, and at the end, the stored object must still have that
digest, and a completed upload must be whole and leave nothing staged.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from attachments.errors import AirlockError
from attachments.models import Attachment, TusUpload
from attachments.storage import get_gateway
from attachments.storage.staging import LocalStaging, staging_for
from attachments.uploads.services import tus as service

pytestmark = pytest.mark.django_db

LENGTH = 24
STALE = timedelta(minutes=2)  # past the claim's staleness (body timeout + 5 s)
EXPIRED = timedelta(minutes=20)  # past AIRLOCK_UPLOAD_URL_SECONDS


@dataclass
class Op:
    kind: str  # patch, head, delete, sweep
    clock: timedelta = timedelta(0)
    offset: str = "head"  # patch: at HEAD's offset, at 0, or one past it
    size: str = "rest"  # patch: the rest, half of it, or one byte more than the rest
    during: list[Op] = field(default_factory=list)  # patch: what runs while its body stalls


def interleavings(depth: int) -> st.SearchStrategy[list[Op]]:
    clock = st.sampled_from([timedelta(0), STALE, EXPIRED])
    simple = st.builds(Op, kind=st.sampled_from(["head", "delete", "sweep"]), clock=clock)
    during = interleavings(depth - 1) if depth > 1 else st.just([])
    patch = st.builds(
        Op,
        kind=st.just("patch"),
        clock=clock,
        offset=st.sampled_from(["head", "zero", "past"]),
        size=st.sampled_from(["rest", "half", "over"]),
        during=during,
    )
    return st.lists(st.one_of(patch, simple), min_size=1, max_size=4)


class Run:
    def __init__(self, user) -> None:
        self.user = user
        self.base = timezone.now()
        upload = service.tus_upload_create(
            user=user, length=LENGTH, profile_name="document", filename="a.pdf", content_type="application/pdf"
        )
        self.pk = upload.pk
        self.key = Attachment.objects.get(pk=self.pk).storage_key
        self.arrived: list[str] = []  # the digest a scan would have recorded
        self.writers = 0  # each PATCH writes its own byte value, so a stray write always shows

    def stored(self) -> bytes | None:
        gateway = get_gateway()
        if gateway.head(self.key) is None:
            return None
        return b"".join(gateway.iter_chunks(self.key))

    def on_arrival(self, **kwargs) -> None:
        data = self.stored()
        assert data is not None, "arrival with nothing stored"
        self.arrived.append(hashlib.sha256(data).hexdigest())

    def check(self) -> None:
        """No write after completion: whatever is stored still has the digest taken at arrival."""
        assert len(self.arrived) <= 1, "completed twice"
        data = self.stored()
        if self.arrived and data is not None:
            assert hashlib.sha256(data).hexdigest() == self.arrived[0], "the stored bytes changed after arrival"
        upload = TusUpload.objects.get(pk=self.pk)
        assert 0 <= upload.offset <= upload.length
        if upload.state == TusUpload.State.COMPLETE:
            assert self.arrived and upload.offset == LENGTH

    def run(self, ops: list[Op]) -> None:
        for op in ops:
            self.step(op)
            self.check()

    def step(self, op: Op) -> None:
        now = self.base + op.clock
        try:
            if op.kind == "head":
                service.tus_upload_recover(user=self.user, attachment_id=self.pk, now=now)
            elif op.kind == "delete":
                service.tus_upload_terminate(user=self.user, attachment_id=self.pk, now=now)
            elif op.kind == "sweep":
                service.tus_uploads_expire(now=now)
            else:
                self.patch(op, now)
        except AirlockError:
            pass  # refused: fine, as long as nothing was corrupted (checked after every step)
        except Exception:
            self.check()  # the bytes first: an error after a stray write must not hide it
            raise  # then the error itself (a 500)

    def patch(self, op: Op, now: datetime) -> None:
        at = TusUpload.objects.get(pk=self.pk).offset
        offset = {"head": at, "zero": 0, "past": at + 1}[op.offset]
        rest = max(LENGTH - offset, 0)
        size = {"rest": rest, "half": rest // 2, "over": rest + 1}[op.size]
        self.writers += 1
        data = bytes([self.writers]) * size
        half = size // 2

        def body():
            yield data[:half]
            for nested in op.during:  # the body stalls here
                self.step(nested)
                self.check()
            yield data[half:]

        service.tus_upload_append(
            user=self.user, attachment_id=self.pk, offset=offset, chunks=body(), content_length=size, now=now
        )


def assert_settled(run: Run) -> None:
    run.check()
    upload = TusUpload.objects.get(pk=run.pk)
    staging = staging_for(get_gateway())
    if upload.state == TusUpload.State.COMPLETE and isinstance(staging, LocalStaging):
        assert not (staging.root / ".tus" / str(run.pk)).exists(), "a completed upload left a staging file"
        data = run.stored()
        assert data is None or len(data) == LENGTH


@pytest.fixture
def generous(settings):
    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(
        intents_per_minute=10**6, pending_per_subject=10**6
    )


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=interleavings(depth=2))
def test_no_write_lands_after_completion_local(alice, generous, monkeypatch, ops):
    note(repr(ops))
    run = Run(alice)
    monkeypatch.setattr(service, "object_arrived", run.on_arrival)
    run.run(ops)
    assert_settled(run)
