"""Sweeper state: the brakes, the record of every run, the lock lease and backfill checkpoints."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class SweeperControl(models.Model):
    """The admin-toggled brakes (a singleton row, pk=1). Settings overrides win over it."""

    SINGLETON_PK = 1

    id = models.PositiveSmallIntegerField(primary_key=True, default=SINGLETON_PK, editable=False)
    killswitch = models.BooleanField(default=False, help_text="Stop every delete (files and rows stay).")
    dry_run = models.BooleanField(default=False, help_text="Record what would be deleted, delete nothing.")
    changed_by = models.CharField(max_length=150, blank=True, default="")
    changed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(id=1), name="sweepercontrol_singleton")]
        verbose_name = "sweeper control"

    def __str__(self) -> str:
        return f"killswitch={self.killswitch} dry_run={self.dry_run}"


class RunMode(models.TextChoices):
    """How a sweep or reconcile run went: its brakes, or the lock another run held."""

    NORMAL = "normal"
    DRY_RUN = "dry_run"
    KILLSWITCH = "killswitch"
    LOCK_BUSY = "lock_busy"


class SweepRun(models.Model):
    """One sweep attempt, whatever it did (even nothing)."""

    Mode = RunMode
    # What the run counted, copied from its report (sweep.py) and shown on its admin page: a new
    # count is added here once.
    COUNTS = (
        "selected",
        "deleted",
        "objects_deleted",
        "errors",
        "dead_lettered",
        "hard_deleted",
        "purged",
        "never_uploaded",
    )

    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    mode = models.CharField(max_length=16, choices=Mode.choices)
    trigger = models.CharField(max_length=16, default="command")  # tick | command
    selected = models.PositiveIntegerField(default=0)
    deleted = models.PositiveIntegerField(default=0)
    objects_deleted = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    dead_lettered = models.PositiveIntegerField(default=0)
    hard_deleted = models.PositiveIntegerField(default=0)
    purged = models.JSONField(default=dict, blank=True)  # retention: rows purged per table
    never_uploaded = models.PositiveIntegerField(default=0)  # committed intents ended as object_missing
    errors_text = models.TextField(blank=True, default="")
    would_delete = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"sweep {self.started_at:%Y-%m-%d %H:%M} {self.mode}: {self.deleted} deleted"


class ReconcileRun(models.Model):
    """One reconcile attempt, whatever it did: like SweepRun, the record an operator reads."""

    Mode = RunMode

    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    mode = models.CharField(max_length=16, choices=Mode.choices)
    trigger = models.CharField(max_length=16, default="command")
    scanned = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict, blank=True)  # findings by kind
    objects_deleted = models.PositiveIntegerField(default=0)
    kept = models.PositiveIntegerField(default=0)  # deletes held back by the killswitch
    expired_leases = models.PositiveIntegerField(default=0)
    redriven = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    errors_text = models.TextField(blank=True, default="")
    note = models.CharField(max_length=200, blank=True, default="")  # why deletes did not happen
    would_delete = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"reconcile {self.started_at:%Y-%m-%d %H:%M} {self.mode}: {self.objects_deleted} deleted"


class SweeperLease(models.Model):
    """The database lock (no Redis): one row per lock name holding a token and an expiry."""

    name = models.CharField(max_length=64, primary_key=True)
    token = models.CharField(max_length=64, blank=True, default="")
    holder = models.CharField(max_length=200, blank=True, default="")
    expires_at = models.DateTimeField()


class BackfillCheckpoint(models.Model):
    """Where a backfill over one selection got to, so an interrupted run resumes."""

    selection = models.CharField(max_length=64, unique=True)  # hash of the selection's parameters
    params = models.JSONField(default=dict)
    last_id = models.UUIDField(null=True, blank=True)
    processed = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
