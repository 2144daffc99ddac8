#!/usr/bin/env python
"""Simulate the upload-first lifecycle over a synthetic population and check the sweeper's promises.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/airlock .venv/bin/python bench/sweeper_sim.py [--n 100000]

Users fill in forms: they upload 1–4 files each, then commit (some after the
upload expired, which fails), commit late while heartbeating, discard, keep a
draft open and heartbeat it daily forever, or simply leave. Some committed
forms live on: the ad is edited down (a commit with replace drops a file), or
deleted (its ref released), and some of those releases are undone within the
grace (restore). Platform staff hold some ads (a ref hold: the owner's later
delete is refused with LEGAL_HOLD) and some drafts (a file hold: abandoned,
they must outlive their expiry), and some users are erased (erase_user: every
unheld file let go and removed at once, tokens revoked). Uploads arrive over
30 simulated days (then a drain period lets every upload's fate play out);
the scheduler tick runs every sweep interval, calling sweep_if_due with the
simulated time. Rows are bulk-created in a scratch database and storage is a
counting in-memory gateway, so what is measured is the database side. Every
client action goes through the real services (heartbeat, discard, commit).

Each upload also leaves the bookkeeping rows the pipeline writes (one storage
event, an intake job and the intent's audit entry; for a processed one two more
jobs, two status transitions and the arrival and scan entries), stamped with the
simulated time, so the retention purge of the sweeper is exercised too; rows
hard-deleted after the audit window leave tombstones.

Every table with a retention rule (sweeper/retention.py RULES) is counted, also
those this simulation does not fill (dead letters, backfill checkpoints, the
admin's log, django-axes' tables, webhook history: no failures, staff, logins or
endpoints here); their rows are tested by tests/sweeper/test_retention.py.

Prints one JSON line: the maximum orphan age (must be <= hard cap + one
interval), committed files lost (must be 0; a released file restored within
its grace counts as committed), uncommitted uploads left past their deadline
(must be 0), released files removed before their grace ended (must be 0) or
later than grace + one interval (must be 0), held files deleted (must be 0), objects of
erased users' unheld files left after their erasure (must be 0), the longest
discard → delete lag, stored objects per live attachment at the end of the upload days
and at the end (must stay within OBJECTS_PER_LIVE_LIMIT), sweep
throughput (rows/s), and the rows of each bookkeeping table per live
attachment at the end of the upload days and at the end of the run (must stay
bounded: at most ROWS_PER_LIVE_LIMIT).
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

BENCH = Path(__file__).resolve().parent
for path in (BENCH, BENCH.parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from sweeper_throughput import T0, MemoryGateway, make_owner, quiet_logs, scratch_database  # noqa: E402

from attachments.errors import AttachmentInvalid, LegalHold, NotFound  # noqa: E402
from attachments.models import (  # noqa: E402
    Attachment,
    Derivative,
    Lifecycle,
    OutboxMessage,
    Status,
    StorageEvent,
    TransitionLog,
)
from attachments.naming import derivative_key, original_key  # noqa: E402
from attachments.retention.services.erasure import erasure_scope_user  # noqa: E402
from attachments.retention.services.holds import attachment_hold_set, ref_hold_set  # noqa: E402
from attachments.retention.services.release import attachment_restore, attachments_release  # noqa: E402
from attachments.services.lifecycle import (  # noqa: E402
    attachment_discard,
    attachments_commit,
    attachments_heartbeat,
)
from sweeper.erasure import erase  # noqa: E402
from sweeper.locks import DatabaseLock  # noqa: E402
from sweeper.retention import RULES  # noqa: E402
from sweeper.schedule import sweep_if_due  # noqa: E402
from webhooks.models import WebhookAttempt, WebhookDelivery  # noqa: E402

DAY = timedelta(days=1)
# Bookkeeping rows per live attachment that still count as bounded: what one
# upload writes (1 event + 3 jobs + its audit timeline: intent, arrived, start,
# scan, finish, a commit or discard, sweep_delete, and one heartbeat row (folded)
# while a draft) times the uploads a live attachment can stand for within the
# longest window, with room to spare. (10 before the timeline had its events;
# the timeline measured 14.7 per live attachment at the end of a 46-day run.)
ROWS_PER_LIVE_LIMIT = 20.0
# Stored objects per live attachment: an upload stores at most 3 (original, served copy, thumbnail).
OBJECTS_PER_LIVE_LIMIT = 3.0
# Every table the retention phase purges (sweeper/retention.py RULES, by its model), plus the
# webhook deliveries and attempts that go with their events.
TABLES = {
    **{name: rule.rows(T0).model for name, rule in RULES.items()},
    # No retention window: kept as long as its file (heartbeats folded into one row per file).
    "transition_logs": TransitionLog,
    "webhook_deliveries": WebhookDelivery,
    "webhook_attempts": WebhookAttempt,
}


class _Stamped:
    """Let bulk_create keep the simulated timestamps of auto_now_add fields (bench only)."""

    FIELDS = [(OutboxMessage, "created_at"), (StorageEvent, "received_at"), (TransitionLog, "created_at")]

    def __enter__(self) -> None:
        for model, name in self.FIELDS:
            model._meta.get_field(name).auto_now_add = False

    def __exit__(self, *exc: object) -> None:
        for model, name in self.FIELDS:
            model._meta.get_field(name).auto_now_add = True


BEHAVIOURS = {  # share of forms
    "commit": 0.26,  # commits within 0–9 days, no heartbeat: late ones find it expired
    "edit": 0.06,  # commits within a day, then edits the ad down by one file (commit replace)
    "delete": 0.04,  # commits within a day, then deletes the ad (release its ref)
    "delete_undo": 0.02,  # deletes the ad, then undoes it within the grace (restore)
    "partial_commit": 0.05,  # removes one file, commits the rest
    "late_commit": 0.05,  # heartbeats daily, commits after 7–14.5 days
    "discard": 0.15,  # discards every file
    "draft": 0.10,  # heartbeats daily forever, never commits
    "abandon": 0.24,  # closes the tab
    "held_delete": 0.02,  # commits; staff hold the ad's ref; the owner's delete of the ad is refused
    "held_abandon": 0.01,  # staff hold the draft's files at once; the owner closes the tab
}


@dataclass
class Form:
    index: int
    user: int
    created: datetime
    ids: list[uuid.UUID]
    behaviour: str


@dataclass
class Tally:
    uploads: int = 0
    forms: int = 0
    commit_calls: int = 0
    committed: int = 0
    commit_refused: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    discarded: int = 0
    released: int = 0
    restored: int = 0
    held: int = 0
    refused_by_hold: int = 0
    erased_users: int = 0
    erased_files: int = 0
    erased_held_skipped: int = 0
    heartbeat_calls: int = 0
    sweeps: int = 0
    sweep_seconds: float = 0.0
    reaped: int = 0
    sweep_errors: int = 0
    reap_seconds: float = 0.0
    purge_seconds: float = 0.0
    runs: list[tuple[int, float]] = field(default_factory=list)  # (rows reaped, seconds) per run


class Simulation:
    def __init__(self, *, n: int, days: int, drain_days: int, users: int, seed: int, progress: bool = False) -> None:
        self.rng = random.Random(seed)
        self.progress = progress
        self.n, self.days, self.drain_days = n, days, drain_days
        self.interval = timedelta(seconds=settings.AIRLOCK_SWEEP.interval_seconds)
        self.cap = timedelta(seconds=settings.AIRLOCK_LIFECYCLE_SECONDS.hard_cap)
        self.ttl = timedelta(seconds=settings.AIRLOCK_LIFECYCLE_SECONDS.staged_ttl)
        self.tenant, self.users = make_owner("sim", users)
        self.gateway = MemoryGateway()
        self.tally = Tally()
        self.lock = DatabaseLock("sweep-sim")
        self.events: list[tuple[datetime, int, str, object]] = []  # (time, seq, kind, payload)
        self._seq = 0
        self.created_at: dict[uuid.UUID, datetime] = {}
        self.original: dict[uuid.UUID, str] = {}
        self.keys: dict[uuid.UUID, list[str]] = {}
        self.committed: set[uuid.UUID] = set()
        self.discarded_at: dict[uuid.UUID, datetime] = {}
        self.grace = timedelta(seconds=settings.AIRLOCK_LIFECYCLE_SECONDS.release_grace)
        self.released_at: dict[uuid.UUID, datetime] = {}  # released and not restored
        self.heartbeating: dict[int, set[uuid.UUID]] = defaultdict(set)
        self.owned: dict[int, list[uuid.UUID]] = defaultdict(list)
        self.held: set[uuid.UUID] = set()
        self.erased: set[int] = set()
        self.erased_at: dict[uuid.UUID, datetime] = {}  # files let go by an erasure, and when
        self.table_sizes: dict[str, dict[str, object]] = {}

    # --- scenario -------------------------------------------------------------------------

    def push(self, when: datetime, kind: str, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self.events, (when, self._seq, kind, payload))

    def plan(self, *, erase_share: float = 0.05) -> None:
        names, weights = list(BEHAVIOURS), list(BEHAVIOURS.values())
        for user in self.rng.sample(range(len(self.users)), round(erase_share * len(self.users))):
            self.push(T0 + timedelta(seconds=self.rng.uniform(0, self.days * 86400)), "erase", user)
        made = 0
        while made < self.n:
            size = min(self.rng.randint(1, 4), self.n - made)
            created = T0 + timedelta(seconds=self.rng.uniform(0, self.days * 86400))
            form = Form(
                self.tally.forms,
                self.rng.randrange(len(self.users)),
                created,
                [uuid.uuid4() for _ in range(size)],
                self.rng.choices(names, weights)[0],
            )
            self.tally.forms += 1
            made += size
            self.push(created, "create", form)
            self.plan_actions(form)
        for user in range(len(self.users)):  # each client heartbeats its open drafts once a day
            self.push(T0 + timedelta(seconds=self.rng.uniform(0, 86400)), "heartbeat", user)

    def plan_actions(self, form: Form) -> None:
        r, c = self.rng, form.created
        if form.behaviour == "commit":
            self.push(c + timedelta(seconds=r.uniform(60, 9 * 86400)), "commit", (form, form.ids))
        elif form.behaviour == "late_commit":
            self.push(c + timedelta(seconds=r.uniform(7 * 86400, 14.5 * 86400)), "commit", (form, form.ids))
        elif form.behaviour == "partial_commit":
            self.push(c + timedelta(seconds=r.uniform(10, 3600)), "discard", (form, form.ids[:1]))
            self.push(c + timedelta(seconds=r.uniform(3600, 2 * 86400)), "commit", (form, form.ids))
        elif form.behaviour in ("edit", "delete", "delete_undo"):
            committed = c + timedelta(seconds=r.uniform(60, 86400))
            self.push(committed, "commit", (form, form.ids))
            later = committed + timedelta(seconds=r.uniform(3600, 20 * 86400))
            if form.behaviour == "edit":
                self.push(later, "replace", (form, form.ids[:-1]))  # one file out (none left for a 1-file ad)
            else:
                self.push(later, "release", form)
            if form.behaviour == "delete_undo":
                self.push(later + timedelta(seconds=r.uniform(60, 0.9 * self.grace.total_seconds())), "restore", form)
        elif form.behaviour == "held_delete":
            committed = c + timedelta(seconds=r.uniform(60, 86400))
            self.push(committed, "commit", (form, form.ids))
            self.push(committed + timedelta(seconds=1800), "hold_ref", form)
            self.push(committed + timedelta(seconds=r.uniform(3600, 20 * 86400)), "release", form)
        elif form.behaviour == "held_abandon":
            self.push(c + timedelta(seconds=60), "hold_files", form)
        elif form.behaviour == "discard":
            for attachment_id in form.ids:
                self.push(c + timedelta(seconds=r.uniform(10, 2 * 86400)), "discard", (form, [attachment_id]))

    # --- client actions, through the real services ------------------------------------------

    def bookkeeping(
        self, pk: uuid.UUID, key: str, when: datetime, processed: bool, jobs: list, events: list, logs: list
    ) -> None:
        """The rows the pipeline writes for one upload, as of `when`."""
        events.append(
            StorageEvent(
                dedupe_key=f"sim:{key}",
                source="local",
                event_name="ObjectCreated:Put",
                key=key,
                size=1,
                outcome="started",
                attachment_id=pk,
                received_at=when,
            )
        )
        for step in ("intake", "scan", "derive")[: 3 if processed else 1]:
            jobs.append(OutboxMessage(actor_name=step, queue_name=step, args=[str(pk)], created_at=when, sent_at=when))
        logs.append(
            TransitionLog(
                attachment_id=pk,
                transition="intent",
                actor="user:sim",
                created_at=when,
                details={"profile": "image", "declared_size": 1},
            )
        )
        if processed:
            logs += [
                TransitionLog(
                    attachment_id=pk,
                    transition=name,
                    from_status=a,
                    to_status=b,
                    actor="worker",
                    created_at=when,
                    details=details,
                )
                for name, a, b, details in (
                    ("arrived", "", "", {"stored_size": 1}),
                    ("start", "pending", "processing", {}),
                    ("scan", "", "", {"duration_ms": 1.0}),
                    ("finish", "processing", "ready", {}),
                )
            ]

    def create(self, forms: list[Form]) -> None:
        rows, derivatives, jobs, events, logs = [], [], [], [], []
        for form in forms:
            owner = self.users[form.user]
            for pk in form.ids:
                key = original_key(tenant_slug=self.tenant.slug, profile="image", attachment_id=pk)
                processed = self.rng.random() < 0.7
                served = (
                    derivative_key(tenant_slug=self.tenant.slug, attachment_id=pk, kind="sanitized", ext="jpg")
                    if processed
                    else ""
                )
                rows.append(
                    Attachment(
                        id=pk,
                        tenant=self.tenant,
                        owner=owner,
                        profile="image",
                        filename="f.jpg",
                        status=Status.READY if processed else Status.PENDING,
                        declared_size=1,
                        declared_type="image/jpeg",
                        storage_key=key,
                        served_key=served,
                        created_at=form.created,
                        uploaded_at=form.created,
                        expires_at=form.created + self.ttl,
                    )
                )
                keys = [key]
                if processed:
                    thumb = derivative_key(tenant_slug=self.tenant.slug, attachment_id=pk, kind="thumbnail", ext="webp")
                    derivatives.append(
                        Derivative(
                            attachment_id=pk, kind="thumbnail", storage_key=thumb, content_type="image/webp", size=1
                        )
                    )
                    keys += [served, thumb]
                self.bookkeeping(pk, key, form.created, processed, jobs, events, logs)
                self.gateway.put(keys, form.created)
                self.created_at[pk], self.original[pk], self.keys[pk] = form.created, key, keys
            self.owned[form.user] += form.ids
            if form.behaviour in ("draft", "late_commit"):
                self.heartbeating[form.user].update(form.ids)
        with transaction.atomic(), _Stamped():
            Attachment.objects.bulk_create(rows)
            Derivative.objects.bulk_create(derivatives)
            OutboxMessage.objects.bulk_create(jobs)
            StorageEvent.objects.bulk_create(events)
            TransitionLog.objects.bulk_create(logs)
        self.tally.uploads += len(rows)

    def commit(self, when: datetime, form: Form, ids: list[uuid.UUID]) -> None:
        ids = [i for i in ids if i not in self.discarded_at]
        owner = self.users[form.user]
        while ids:
            self.tally.commit_calls += 1
            try:
                attachments_commit(owner=owner, ids=ids, ref=f"form:{form.index}", now=when)
            except AttachmentInvalid as exc:  # the client drops what the server refused and retries
                for reason in exc.details.values():
                    self.tally.commit_refused[reason] += 1
                ids = [i for i in ids if str(i) not in exc.details]
                continue
            self.committed.update(ids)
            self.tally.committed += len(ids)
            break
        self.heartbeating[form.user].difference_update(form.ids)

    def replace(self, when: datetime, form: Form, ids: list[uuid.UUID]) -> None:
        """The ad edited down: `ids` become its whole set (an empty edit releases the ref)."""
        kept = [i for i in ids if i in self.committed]
        dropped = [i for i in form.ids if i in self.committed and i not in kept]
        if kept:
            attachments_commit(owner=self.users[form.user], ids=kept, ref=f"form:{form.index}", now=when, replace=True)
        elif dropped:
            attachments_release(user=self.users[form.user], ref=f"form:{form.index}", now=when)
        self.mark_released(when, dropped)

    def release(self, when: datetime, form: Form) -> None:
        try:
            released = attachments_release(user=self.users[form.user], ref=f"form:{form.index}", now=when)
        except LegalHold:  # the ad is held: nothing released, the files stay committed
            self.tally.refused_by_hold += 1
            return
        self.mark_released(when, [uuid.UUID(pk) for pk in released if uuid.UUID(pk) in self.committed])

    def mark_released(self, when: datetime, ids: list[uuid.UUID]) -> None:
        for pk in ids:
            self.committed.discard(pk)
            self.released_at[pk] = when
            self.tally.released += 1

    def restore(self, when: datetime, form: Form) -> None:
        for pk in form.ids:
            if pk in self.released_at:
                attachment_restore(user=self.users[form.user], attachment_id=pk, now=when)
                del self.released_at[pk]
                self.committed.add(pk)
                self.tally.restored += 1

    def discard(self, when: datetime, form: Form, ids: list[uuid.UUID]) -> None:
        for attachment_id in ids:
            try:
                attachment_discard(user=self.users[form.user], attachment_id=attachment_id, now=when)
            except NotFound:  # already swept
                continue
            self.discarded_at.setdefault(attachment_id, when)
            self.tally.discarded += 1
        self.heartbeating[form.user].difference_update(ids)

    def hold_ref(self, when: datetime, form: Form) -> None:
        """Platform staff hold the ad (its ref): every file committed to it is kept."""
        ref_hold_set(tenant=self.tenant.slug, ref=f"form:{form.index}", actor="staff:legal", reason="sim", now=when)
        held = [pk for pk in form.ids if pk in self.committed]
        self.held.update(held)
        self.tally.held += len(held)

    def hold_files(self, when: datetime, form: Form) -> None:
        ids = [pk for pk in form.ids if pk in self.created_at]
        attachment_hold_set(attachment_ids=ids, actor="staff:legal", reason="sim")
        self.held.update(ids)
        self.tally.held += len(ids)

    def erase_user(self, when: datetime, user: int) -> None:
        """erase_user: every unheld file of the user let go and removed now; the user acts no more."""
        self.gateway.clock = when
        # What is still stored now (a file swept before the erasure is not the erasure's)
        present = [pk for pk in self.owned[user] if pk in self.created_at and self.original[pk] in self.gateway.objects]
        report = erase(
            erasure_scope_user(self.users[user].get_username()),
            actor="command:erase_user:sim",
            now=when,
            gateway=self.gateway,
        )
        self.erased.add(user)
        self.tally.erased_users += 1
        self.tally.erased_files += report.files_removed
        self.tally.erased_held_skipped += len(report.held_skipped)
        self.heartbeating.pop(user, None)
        for pk in present:
            if pk in self.held:
                continue  # kept: the erasure skips it
            self.committed.discard(pk)
            self.released_at.pop(pk, None)
            self.erased_at[pk] = when

    def heartbeat(self, when: datetime, user: int) -> None:
        ids = sorted(self.heartbeating[user])
        for start in range(0, len(ids), 1000):
            self.tally.heartbeat_calls += 1
            result = attachments_heartbeat(user=self.users[user], ids=ids[start : start + 1000], now=when)
            self.heartbeating[user].difference_update(uuid.UUID(m) for m in result.missing)
        self.push(when + DAY, "heartbeat", user)

    # --- the clock ---------------------------------------------------------------------------

    def run(self) -> None:
        end = T0 + (self.days + self.drain_days) * DAY
        now = T0
        while now <= end:
            batch: list[Form] = []
            while self.events and self.events[0][0] <= now:
                when, _seq, kind, payload = heapq.heappop(self.events)
                user = (
                    payload
                    if isinstance(payload, int)
                    else getattr(payload[0] if isinstance(payload, tuple) else payload, "user", None)
                )
                if user in self.erased:
                    continue  # an erased user's client is gone
                if kind == "create":
                    batch.append(payload)  # type: ignore[arg-type]
                    continue
                if batch:
                    self.create(batch)
                    batch = []
                if kind == "commit":
                    self.commit(when, *payload)  # type: ignore[misc]
                elif kind == "discard":
                    self.discard(when, *payload)  # type: ignore[misc]
                elif kind == "replace":
                    self.replace(when, *payload)  # type: ignore[misc]
                elif kind == "release":
                    self.release(when, payload)  # type: ignore[arg-type]
                elif kind == "restore":
                    self.restore(when, payload)  # type: ignore[arg-type]
                elif kind == "heartbeat":
                    self.heartbeat(when, payload)  # type: ignore[arg-type]
                elif kind == "hold_ref":
                    self.hold_ref(when, payload)  # type: ignore[arg-type]
                elif kind == "hold_files":
                    self.hold_files(when, payload)  # type: ignore[arg-type]
                elif kind == "erase":
                    self.erase_user(when, payload)  # type: ignore[arg-type]
            if batch:
                self.create(batch)
            self.tick(now)
            if "upload_days_end" not in self.table_sizes and now >= T0 + self.days * DAY:
                self.table_sizes["upload_days_end"] = self.measure_tables()
            now += self.interval
            if self.progress and (now - T0) % DAY < self.interval:
                day = (now - T0) // DAY
                print(
                    f"\rday {day}/{self.days + self.drain_days}: {self.tally.uploads} uploads, "
                    f"{self.tally.committed} committed, {self.tally.reaped} reaped",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
        if self.progress:
            print(file=sys.stderr)
        self.end = end
        self.table_sizes["end"] = self.measure_tables()

    def measure_tables(self) -> dict[str, object]:
        """Rows of each bookkeeping table, and per live (not deleted) attachment."""
        live = Attachment.objects.exclude(lifecycle=Lifecycle.DELETED).count()
        rows = {name: model.objects.count() for name, model in TABLES.items()}
        return {
            "live_attachments": live,
            "rows": rows,
            "per_live": {name: round(n / max(live, 1), 3) for name, n in rows.items()},
            "stored_objects": len(self.gateway.objects),
            "objects_per_live": round(len(self.gateway.objects) / max(live, 1), 3),
        }

    def tick(self, now: datetime) -> None:
        self.gateway.clock = now
        started = time.monotonic()
        report = sweep_if_due(now=now, gateway=self.gateway, lock=self.lock)
        if report is None:
            return
        seconds = time.monotonic() - started
        self.tally.sweeps += 1
        self.tally.sweep_seconds += seconds
        self.tally.runs.append((report.deleted, seconds))
        self.tally.reap_seconds += report.reap_seconds
        self.tally.purge_seconds += report.purge_seconds
        self.tally.reaped += report.deleted
        self.tally.sweep_errors += report.errors

    # --- what happened -------------------------------------------------------------------------

    def results(self) -> dict[str, object]:
        deleted_at = self.gateway.deleted_at
        lost = sum(1 for pk in self.committed if any(k in deleted_at for k in self.keys[pk]))
        orphan_ages, overdue, discard_lags = [], 0, []
        release_lags, released_early, released_late = [], 0, 0
        for pk, released in self.released_at.items():
            gone = deleted_at.get(self.original[pk])
            if gone is not None:
                release_lags.append((gone - released).total_seconds())
                released_early += gone < released + self.grace
                released_late += gone > released + self.grace + self.interval
            elif released + self.grace + self.interval < self.end:
                released_late += 1
        held_deleted = sum(1 for pk in self.held if any(k in deleted_at for k in self.keys[pk]))
        erased_left = sum(1 for pk in self.erased_at if any(k in self.gateway.objects for k in self.keys[pk]))
        erase_lags = [
            (deleted_at[self.original[pk]] - when).total_seconds()
            for pk, when in self.erased_at.items()
            if self.original[pk] in deleted_at
        ]
        for pk, created in self.created_at.items():
            if pk in self.committed or pk in self.released_at or pk in self.held or pk in self.erased_at:
                continue
            gone = deleted_at.get(self.original[pk])
            orphan_ages.append(((gone or self.end) - created).total_seconds())
            if gone is None and created + self.cap + self.interval < self.end:
                overdue += 1
            if gone is not None and pk in self.discarded_at:
                discard_lags.append((gone - self.discarded_at[pk]).total_seconds())
        committed_rows = Attachment.objects.filter(lifecycle=Lifecycle.COMMITTED).count()
        limit = (self.cap + self.interval).total_seconds()
        max_age = max(orphan_ages, default=0.0)
        t = self.tally
        idle = sorted(secs for rows, secs in t.runs if rows == 0)
        bounded = all(
            ratio <= ROWS_PER_LIVE_LIMIT for sizes in self.table_sizes.values() for ratio in sizes["per_live"].values()
        )  # type: ignore[union-attr]
        objects_stable = all(
            sizes["objects_per_live"] <= OBJECTS_PER_LIVE_LIMIT  # type: ignore[operator]
            for sizes in self.table_sizes.values()
        )
        return {
            "bench": "sweeper_sim",
            "database": connection.vendor,
            "n": self.n,
            "users": len(self.users),
            "days": self.days,
            "drain_days": self.drain_days,
            "interval_s": self.interval.total_seconds(),
            "max_orphan_age_s": max_age,
            "max_orphan_age_days": round(max_age / 86400, 4),
            "orphan_age_limit_s": limit,
            "orphan_age_ok": max_age <= limit,
            "committed_files_lost": lost,
            "committed_rows": committed_rows,
            "committed_rows_match": committed_rows == len(self.committed),
            "uncommitted_overdue_at_end": overdue,
            "max_discard_to_delete_s": max(discard_lags, default=0.0),
            "released_files": len(self.released_at),
            "released_removed_before_grace": released_early,
            "released_removed_late": released_late,
            "release_to_delete_s": [min(release_lags, default=0.0), max(release_lags, default=0.0)],
            "release_grace_s": self.grace.total_seconds(),
            "held_files": len(self.held),
            "held_files_deleted": held_deleted,
            "deletes_refused_by_hold": t.refused_by_hold,
            "erased_users": t.erased_users,
            "erased_files": len(self.erased_at),
            "erased_files_removed": t.erased_files,
            "erased_held_skipped": t.erased_held_skipped,
            "erased_objects_left": erased_left,
            "erase_to_delete_s": [min(erase_lags, default=0.0), max(erase_lags, default=0.0)],
            "objects_per_live_limit": OBJECTS_PER_LIVE_LIMIT,
            "objects_per_live_stable": objects_stable,
            # Rows reaped per second of batch work (lock, delete objects, one UPDATE per batch).
            "sweep_rows_per_s": round(t.reaped / t.reap_seconds, 1) if t.reap_seconds else None,
            # Everything a run costs, divided by the rows it reaped: most runs reap a few dozen rows,
            # so this is dominated by the fixed cost of a run (brakes, lock, run record, purge query).
            "sweep_rows_per_s_incl_run_overhead": round(t.reaped / t.sweep_seconds, 1) if t.sweep_seconds else None,
            "sweep_run_overhead_ms_median": round(1000 * idle[len(idle) // 2], 2) if idle else None,
            "purge_seconds_total": round(t.purge_seconds, 2),
            "max_rows_in_one_run": max((r for r, _ in t.runs), default=0),
            "sweeps": t.sweeps,
            "sweep_seconds_total": round(t.sweep_seconds, 2),
            "reaped": t.reaped,
            "sweep_errors": t.sweep_errors,
            "uploads": t.uploads,
            "forms": t.forms,
            "committed": t.committed,
            "commit_calls": t.commit_calls,
            "commit_refused": dict(t.commit_refused),
            "discarded": t.discarded,
            "released": t.released,
            "restored": t.restored,
            "heartbeat_calls": t.heartbeat_calls,
            "objects_left": len(self.gateway.objects),
            "table_sizes": self.table_sizes,
            "rows_per_live_limit": ROWS_PER_LIVE_LIMIT,
            "tables_bounded": bounded,
            "ok": max_age <= limit
            and lost == 0
            and overdue == 0
            and bounded
            and released_early == 0
            and released_late == 0
            and held_deleted == 0
            and erased_left == 0
            and objects_stable
            and max(erase_lags, default=0.0) <= self.interval.total_seconds(),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="attachments uploaded over the simulation")
    parser.add_argument("--days", type=int, default=30, help="days during which uploads arrive")
    parser.add_argument(
        "--drain-days",
        type=int,
        default=16,
        help="days simulated after the last upload, so every upload's fate plays out",
    )
    parser.add_argument("--users", type=int, default=None, help="default: n // 500, at least 10")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--erase-share", type=float, default=0.05, help="share of users erased during the days")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    args = parser.parse_args()
    quiet_logs()
    started = time.monotonic()
    with scratch_database():
        sim = Simulation(
            n=args.n,
            days=args.days,
            drain_days=args.drain_days,
            users=args.users or max(10, args.n // 500),
            seed=args.seed,
            progress=not args.quiet,
        )
        sim.plan(erase_share=args.erase_share)
        sim.run()
        result = sim.results()
    result["wall_seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(result))
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
