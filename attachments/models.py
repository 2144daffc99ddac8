"""Attachments: the row is the system of record; storage and the broker follow it."""

from __future__ import annotations

import threading
import uuid
from typing import Any, Self

from django.conf import settings
from django.db import models
from django.db.models import Exists, OuterRef, Q
from django_fsm import ConcurrentTransitionMixin, FSMField, transition

from .reasons import ReasonCode


class Tenant(models.Model):
    slug = models.SlugField(max_length=63, unique=True)
    name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Overrides of AIRLOCK_TENANT_QUOTA (bytes, files); empty = the global default.
    quota_bytes = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Bytes this tenant may hold; empty = AIRLOCK_TENANT_QUOTA.bytes."
    )
    quota_files = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Files this tenant may hold; empty = AIRLOCK_TENANT_QUOTA.files."
    )

    def __str__(self) -> str:
        return self.slug


class TenantUsage(models.Model):
    """What a tenant holds now: one counter row per tenant (attachments/services/quotas.py).

    Moved in the same transaction as every change that starts or stops a file
    counting, so an intent checks its quota with one conditional UPDATE instead
    of summing the tenant's files.
    """

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, primary_key=True, related_name="usage")
    bytes_used = models.BigIntegerField(default=0)
    files_used = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.tenant_id}: {self.bytes_used} B, {self.files_used} files"


class SubjectUsage(models.Model):
    """What one subject of a tenant holds now, kept only while a subject quota is set (services/quotas.py).

    Moved in the same transactions as TenantUsage, after it; created from the
    subject's rows the first time it is needed.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="subject_usage", db_index=False)
    subject = models.CharField(max_length=128)
    bytes_used = models.BigIntegerField(default=0)
    files_used = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "subject"], name="subjectusage_unique")]

    def __str__(self) -> str:
        return f"{self.tenant_id}:{self.subject}: {self.bytes_used} B, {self.files_used} files"


class Membership(models.Model):
    """Every user belongs to exactly one tenant."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership")
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="memberships")

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant}"


class ApiToken(models.Model):
    """An API key, kept only as its SHA-256: a stolen database or backup holds no usable key.

    The key itself is 160 random bits, so a plain (unsalted, fast) hash is enough:
    nothing to guess, and one indexed lookup per request.
    """

    digest = models.CharField(max_length=64)  # unique: apitoken_digest_unique
    # The first characters of the key, to tell tokens apart in the admin (not secret enough to use).
    prefix = models.CharField(max_length=8)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["digest"], name="apitoken_digest_unique")]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


class UploadLink(models.Model):
    """A link (and its QR code) through which guests without an account upload to one ref.

    Made by a host's service account, which owns what guests send; each device
    that opens it becomes a guest subject (LinkGuest). Files sent through it are
    committed to `ref` once ready, after approval when `requires_approval`.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="upload_links")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="upload_links")
    ref = models.CharField(max_length=200)
    title = models.CharField(max_length=200, blank=True, default="")
    profiles = models.JSONField(default=list, blank=True)  # empty: the link's default profile set
    requires_approval = models.BooleanField(default=False)
    max_files_per_guest = models.PositiveIntegerField(null=True, blank=True)
    max_bytes_per_guest = models.PositiveBigIntegerField(null=True, blank=True)
    max_files = models.PositiveIntegerField(null=True, blank=True)
    files_used = models.PositiveIntegerField(default=0)  # all guests together, against max_files
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    disabled_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.title or self.ref} ({self.id})"


class LinkGuest(models.Model):
    """One device that opened an upload link: its subject, and what it sent (per-guest limits)."""

    link = models.ForeignKey(UploadLink, on_delete=models.CASCADE, related_name="guests", db_index=False)
    subject = models.CharField(max_length=128)
    files_used = models.PositiveIntegerField(default=0)
    bytes_used = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["link", "subject"], name="linkguest_once")]

    def __str__(self) -> str:
        return f"{self.link_id}:{self.subject}"


class Approval(models.TextChoices):
    NOT_REQUIRED = "not_required"
    PENDING = "pending"
    APPROVED = "approved"
    DECLINED = "declined"


class ClientToken(models.Model):
    """A short-lived token a host mints for one of its people's devices (attachments/client_tokens/).

    It acts as the minting account, confined to one subject and to what the host
    granted: profiles, a ref to commit to, and a budget of files and bytes that
    `files_used`/`bytes_used` count (moved by conditional UPDATEs, so concurrent
    intents cannot pass it). Kept only as its SHA-256, like an ApiToken.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    digest = models.CharField(max_length=64)  # unique: clienttoken_digest_unique
    prefix = models.CharField(max_length=12)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="client_tokens", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="client_tokens")
    subject = models.CharField(max_length=128)
    profiles = models.JSONField(default=list, blank=True)  # empty: every profile
    ref = models.CharField(max_length=200, null=True, blank=True)  # the one ref it may commit to, if any
    max_files = models.PositiveIntegerField(null=True, blank=True)
    max_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    files_used = models.PositiveIntegerField(default=0)
    bytes_used = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Minted by an upload link's page for one of its guests: its intents count against the link's limits.
    upload_link = models.ForeignKey(
        UploadLink, null=True, blank=True, on_delete=models.CASCADE, related_name="client_tokens", db_index=False
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["digest"], name="clienttoken_digest_unique")]
        indexes = [
            models.Index(fields=["tenant", "subject"], name="clienttoken_subject"),
            # The sweeper's retention walks expired tokens by it (a guest page mints one per visit).
            models.Index(fields=["expires_at"], name="clienttoken_expires"),
        ]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.tenant_id}:{self.subject})"


class Status(models.TextChoices):
    PENDING = "pending"
    PROCESSING = "processing"
    READY = "ready"
    REJECTED = "rejected"
    FAILED = "failed"


class Lifecycle(models.TextChoices):
    STAGED = "staged"
    COMMITTED = "committed"
    DISCARDED = "discarded"
    # Was committed; its owner (or a moderator) let it go. Restorable until expires_at, then swept.
    RELEASED = "released"
    DELETED = "deleted"


TERMINAL_STATUSES = (Status.READY, Status.REJECTED, Status.FAILED)

# The columns a transition that ends the current lease writes (see Attachment's transitions).
_ENDS_LEASE = ("lease_token", "lease_expires_at", "step")
_ENDS_LEASE_WITH_REASON = ("reason_code", "reason_message", *_ENDS_LEASE)
# What the attachment resource shows (api/serializers.py): every narrow read that answers with it loads these.
_RESOURCE_FIELDS = (
    "subject",
    "profile",
    "status",
    "filename",
    "size",
    "content_type",
    "sha256",
    "metadata",
    "reason_code",
    "reason_message",
    "lifecycle",
    "created_at",
    "ready_at",
    "expires_at",
    "ref",
    "legal_hold",
    "approval",
    "duplicate_of",
)


class AttachmentQuerySet(models.QuerySet["Attachment"]):
    """Named reads: each loads only the columns its callers use.

    A column a caller touches but the read left out costs one more query on first
    touch (tests/pipeline/test_statement_counts.py fails on one).
    """

    def only(self, *fields: str) -> Self:
        """Narrow reads always include `status`.

        ConcurrentTransitionMixin reads the status of every row it builds: left
        out, it costs one query per row, through django-fsm-2's refresh of a
        protected field, which lifts `protected` on the field object every thread shares.
        """
        return super().only(*fields, "status")

    def for_transition(self) -> AttachmentQuerySet:
        """What a service reads under the row lock: the lease check, the transitions, the audit rows (the
        arrival's verified digest), the columns the tenant's usage counter follows (quotas.USAGE_FIELDS), and
        the subject the next job carries (processing/fairness.py)."""
        return self.only(
            "tenant",
            "subject",
            "lease_token",
            "step",
            "lifecycle",
            "uploaded_at",
            "attempts",
            "storage_key",
            "reason_code",
            "reason_message",
            "multipart_upload_id",
            "stored_size",
            "declared_size",
            "declared_sha256",
            "scan_signatures",
            # what the duplicate rule reads when the file becomes ready (services/duplicates.py)
            "profile",
            "subject",
            "ref",
            "sha256",
            "created_at",
        )

    def for_step(self) -> AttachmentQuerySet:
        """What a pipeline step reads (never the extracted text), with its tenant.

        Of the client's claims, only the size and digest intake compares with the bytes.
        """
        return self.select_related("tenant").only(
            "tenant__slug",
            "owner",
            "subject",
            "profile",
            "lease_token",
            "step",
            "uploaded_at",
            "lifecycle",
            "storage_key",
            "content_key",
            "served_key",  # with content_key: whether the original was removed (original_removed)
            "upload_sealed",
            "arrived_etag",  # with arrived_size: what intake's snapshot copy is compared with
            "arrived_size",
            "stored_size",
            "content_type",
            "metadata",
            "declared_size",
            "declared_sha256",
            "upload_link",  # a link's file is committed to the link's ref once ready
            # what the last stage's flip decides from, with no lock read (services/processing.py _finish):
            # the duplicate rule's ref, digest and age, and the signatures its audit row names
            "ref",
            "sha256",
            "created_at",
            "scan_signatures",
            "reason_code",  # the transition's log line names it
        )

    def for_upload(self) -> AttachmentQuerySet:
        """What the upload PUT checks and what its 202 shows: no pipeline bookkeeping, no text, no owner."""
        return self.only(
            *_RESOURCE_FIELDS,
            "tenant",  # the intake job's argument
            "declared_size",
            "declared_type",
            "declared_sha256",
            "storage_key",
            "uploaded_at",
        )

    def by_pk(self, pk: object) -> Attachment | None:
        """The row with this primary key, or None; a slice, so no ORDER BY is built (first() adds one)."""
        return next(iter(self.filter(pk=pk)[:1]), None)

    def for_resource(self, *also: str) -> AttachmentQuerySet:
        """Only what the resource, the gating rule and the file response read (and the fields in `also`).

        Not the extracted text (up to a megabyte) nor the processing bookkeeping:
        building the full row would be a good share of a status read's CPU
        (tests/api/test_hot_paths.py catches a deferred field being touched).
        """
        return self.only(
            "id", "tenant_id", "owner_id", *_RESOURCE_FIELDS, "served_key", "content_key", "storage_key", *also
        )

    def outstanding_uploads(self, *, tenant_id: int, subject: str, now) -> AttachmentQuerySet:
        """A subject's intents whose bytes never came and that have not expired (index att_pending_subject)."""
        return self.filter(
            tenant_id=tenant_id,
            subject=subject,
            status=Status.PENDING,
            lifecycle=Lifecycle.STAGED,
            uploaded_at__isnull=True,
            expires_at__gt=now,
        )


def ref_held_exists() -> Exists:
    """True for a row whose (tenant, ref) has an active RefHold: one probe of refhold_active_unique."""
    return Exists(RefHold.objects.filter(tenant_id=OuterRef("tenant_id"), ref=OuterRef("ref"), cleared_at__isnull=True))


def _taken_down_by_moderator(instance: models.Model) -> bool:
    return isinstance(instance, Attachment) and instance.reason_code == ReasonCode.MODERATOR


# Attachment.refresh_from_db: see there.
_REFRESHING = threading.RLock()


class Attachment(ConcurrentTransitionMixin, models.Model):
    # Every index is paid on each INSERT and on each status/lifecycle UPDATE (none of
    # those is HOT), so there are no single-column ones that a composite index in
    # Meta already leads with (tenant, owner, status), and unique keys are Meta
    # constraints: a field-level unique CharField also gets a varchar_pattern_ops
    # index on PostgreSQL, for LIKE queries nobody makes. See migration 0007.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="attachments", db_index=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="attachments", db_index=False
    )
    # The host's id for the person the file is for (attachments/subjects.py); the owner's username by default.
    subject = models.CharField(max_length=128, default="", db_default="")
    profile = models.CharField(max_length=32)
    status = FSMField(default=Status.PENDING, choices=Status.choices, protected=True)

    # What the client claimed: validated once at the intent, never trusted after.
    filename = models.CharField(max_length=255)
    declared_size = models.BigIntegerField()
    declared_type = models.CharField(max_length=127)
    # The client's SHA-256 of its bytes (lowercase hex), when the intent declared one.
    declared_sha256 = models.CharField(max_length=64, blank=True, default="")

    # What storage and the bytes say, filled in by processing.
    storage_key = models.CharField(max_length=512)  # unique: att_storage_key_unique
    served_key = models.CharField(max_length=512, blank=True, default="")
    # Where the bytes under processing live when the upload key stays writable by
    # the client (S3 presigned POST can be replayed until it expires): intake
    # copies them to a key only the server writes, so what was scanned is what
    # is served. Empty when the upload key itself is immutable.
    content_key = models.CharField(max_length=512, blank=True, default="")
    # The server itself assembled the object at storage_key (S3 CompleteMultipartUpload
    # of a multipart intent, or a tus upload's last byte): the upload id is spent, no URL
    # a client holds can write that key again, so intake reads it in place, with no snapshot copy.
    upload_sealed = models.BooleanField(default=False)
    # The upload as the client's "complete" saw it (a HEAD): its ETag and size, one look.
    # Intake's snapshot copy that storage answers with this ETag holds these bytes, so it
    # takes this size and needs no HEAD of its own; a copy with another ETag (the upload
    # replaced since) is looked at. Empty when no arrival told an ETag.
    arrived_etag = models.CharField(max_length=128, blank=True, default="", db_default="")
    arrived_size = models.BigIntegerField(null=True, blank=True)
    quarantine_key = models.CharField(max_length=512, blank=True, default="")
    stored_size = models.BigIntegerField(null=True, blank=True)
    size = models.BigIntegerField(null=True, blank=True)
    content_type = models.CharField(max_length=127, blank=True, default="")
    sha256 = models.CharField(max_length=64, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    text = models.TextField(blank=True, default="")
    # An earlier available file of the same tenant with the same sha256, in the same ref (or of
    # the same subject, without a ref), when this one became ready or was committed
    # (services/duplicates.py). A fact of that moment: it stays if that twin goes later.
    duplicate_of = models.UUIDField(null=True, blank=True)

    reason_code = models.CharField(max_length=32, blank=True, default="", choices=ReasonCode.choices)
    reason_message = models.CharField(max_length=500, blank=True, default="")

    # The signatures the last clean verdict came from (processing/scanners: signature_version),
    # and when. A ready file whose version is not the one in force is rescanned in the
    # background (processing/rescan/jobs.py), staying ready meanwhile.
    scan_signatures = models.CharField(max_length=300, blank=True, default="")
    scanned_at = models.DateTimeField(null=True, blank=True)
    # An operator asked for a rescan whatever the version (`manage.py rescan`); cleared by it.
    rescan_requested_at = models.DateTimeField(null=True, blank=True)

    # Processing bookkeeping: a lease per attempt; messages carry the lease token
    # so a stale or duplicate message can tell it lost.
    attempts = models.PositiveIntegerField(default=0)
    lease_token = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    step = models.CharField(max_length=16, blank=True, default="")
    uploaded_at = models.DateTimeField(null=True, blank=True)
    # When a stage last handed the file back because a dependency it needs (a scanner, storage)
    # was down (services/processing.py): the tenant's backlog clock restarts there (services/backlog.py).
    dependency_wait_at = models.DateTimeField(null=True, blank=True)
    # S3 multipart intents: the UploadId, kept server-side until the parts are
    # assembled (cleared then); the sweeper aborts it for abandoned intents.
    multipart_upload_id = models.CharField(max_length=1024, null=True, blank=True)

    # Lifecycle (orthogonal to status).
    lifecycle = models.CharField(max_length=16, choices=Lifecycle.choices, default=Lifecycle.STAGED)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)
    ready_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    committed_at = models.DateTimeField(null=True, blank=True)
    ref = models.CharField(max_length=200, null=True, blank=True)
    discarded_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    delete_attempts = models.PositiveIntegerField(default=0)
    delete_error = models.CharField(max_length=500, blank=True, default="")
    # A retention (legal) hold placed by platform staff on this file: no delete path touches it
    # (retention/services/holds.py). A hold on its ref (RefHold) counts the same; see holds.held_q().
    legal_hold = models.BooleanField(default=False)
    # Sent through an upload link (a guest's file), and whether it waits for the host's approval.
    upload_link = models.ForeignKey(
        UploadLink, null=True, blank=True, on_delete=models.SET_NULL, related_name="attachments", db_index=False
    )
    approval = models.CharField(
        max_length=16, choices=Approval.choices, default=Approval.NOT_REQUIRED, db_default=Approval.NOT_REQUIRED
    )

    objects = AttachmentQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="att_owner_created"),
            # A subject's files (its list, slot, discard-all, erasure), and its outstanding
            # intents (the pending cap probed on every intent: never its whole history).
            models.Index(fields=["tenant", "subject", "-created_at"], name="att_tenant_subject"),
            models.Index(
                fields=["tenant", "subject", "expires_at"],
                name="att_pending_subject",
                condition=Q(status="pending", lifecycle="staged", uploaded_at__isnull=True),
            ),
            models.Index(fields=["tenant", "status"], name="att_tenant_status"),
            # The sweeper's selection: staged/discarded/released rows by expiry.
            models.Index(
                fields=["expires_at"],
                name="att_sweep_expiry",
                condition=Q(lifecycle__in=["staged", "discarded", "released"]),
            ),
            models.Index(fields=["status", "lease_expires_at"], name="att_status_lease"),
            # The approval queue: a link's (or a ref's) files waiting for the host's decision.
            models.Index(
                fields=["upload_link", "created_at"], name="att_approval_queue", condition=Q(approval="pending")
            ),
            # The purge of soft-deleted rows after the audit window.
            models.Index(fields=["deleted_at"], name="att_purge_deleted", condition=Q(lifecycle="deleted")),
            # The background rescan's walk: ready files, newest first, from its checkpoint.
            models.Index(fields=["created_at", "id"], name="att_ready_created", condition=Q(status="ready")),
            # The duplicate rule's lookup: a tenant's ready files with these bytes (services/duplicates.py).
            models.Index(fields=["tenant", "sha256"], name="att_ready_sha256", condition=Q(status="ready")),
            # Ready videos whose web rendition waits (services/renditions.py re-drives lost transcodes).
            models.Index(
                fields=["ready_at"],
                name="att_rendition_pending",
                condition=Q(status="ready", metadata__renditions__web__status="pending"),
            ),
        ]
        constraints = [models.UniqueConstraint(fields=["storage_key"], name="att_storage_key_unique")]
        permissions = [("moderate_attachment", "Can take down, restore, rescan and requeue attachments")]
        # Django loads a deferred column through the base manager: ours adds `status` to that read.
        base_manager_name = "objects"

    def __str__(self) -> str:
        return f"{self.profile}:{self.id} ({self.status})"

    def refresh_from_db(self, *args: Any, **kwargs: Any) -> None:
        # django-fsm-2 lifts `protected` on the status field (one object every thread shares)
        # for the length of a refresh and puts it back after: two refreshes at once in a
        # worker's threads would put it back under each other, and the second one's write
        # of `status` would raise. One refresh at a time keeps the flag consistent.
        with _REFRESHING:
            super().refresh_from_db(*args, **kwargs)

    @property
    def original_removed(self) -> bool:
        """The original is gone and the row works from its location-free copy (services/renditions.py)."""
        return bool(self.content_key) and self.content_key == self.served_key

    @property
    def working_key(self) -> str:
        """The key holding the bytes the pipeline checks and serves."""
        return self.content_key or self.storage_key

    # --- transitions: pure, they only set fields --------------------------------
    # `writes` names the columns each one sets besides the status: the service saves
    # exactly those (tests/pipeline/test_state_machine.py checks every transition).

    @transition(
        field=status,
        source=Status.PENDING,
        target=Status.PROCESSING,
        custom={"writes": ("lease_token", "lease_expires_at", "step")},
    )
    def start(self, *, lease_token: uuid.UUID, lease_expires_at, step: str = "intake") -> None:
        self.lease_token = lease_token
        self.lease_expires_at = lease_expires_at
        self.step = step

    @transition(
        field=status,
        source=Status.PROCESSING,
        target=Status.READY,
        custom={"writes": ("ready_at", "lease_token", "lease_expires_at", "step", "reason_code", "reason_message")},
    )
    def finish(self, *, now) -> None:
        self.ready_at = now
        self.lease_token = None
        self.lease_expires_at = None
        self.step = ""
        self.reason_code = ""
        self.reason_message = ""

    @transition(
        field=status,
        source=[Status.PENDING, Status.PROCESSING],
        target=Status.REJECTED,
        custom={"writes": _ENDS_LEASE_WITH_REASON},
    )
    def reject(self, *, code: ReasonCode | str, message: str) -> None:
        self.reason_code = ReasonCode(code)  # an unknown code fails here, before anything is written
        self.reason_message = message[:500]
        self.lease_token = None
        self.lease_expires_at = None
        self.step = ""

    @transition(
        field=status, source=Status.PROCESSING, target=Status.FAILED, custom={"writes": _ENDS_LEASE_WITH_REASON}
    )
    def fail(self, *, message: str) -> None:
        self.reason_code = ReasonCode.INFRASTRUCTURE
        self.reason_message = message[:500]
        self.lease_token = None
        self.lease_expires_at = None
        self.step = ""

    @transition(
        field=status, source=Status.READY, target=Status.FAILED, custom={"writes": ("reason_code", "reason_message")}
    )
    def lose(self, *, message: str) -> None:
        # Reconcile found the stored original gone: not the file's fault (failed, not
        # rejected), and nothing left to serve. A restored object comes back by `retry`.
        self.reason_code = ReasonCode.OBJECT_MISSING
        self.reason_message = message[:500]

    @transition(
        field=status,
        source=[Status.PROCESSING, Status.FAILED],
        target=Status.PENDING,
        custom={"writes": ("attempts", *_ENDS_LEASE)},
    )
    def retry(self, *, reset_attempts: bool = False) -> None:
        # Staff requeueing a dead-lettered file give it a fresh set of attempts.
        self.attempts = 0 if reset_attempts else self.attempts + 1
        self.lease_token = None
        self.lease_expires_at = None
        self.step = ""

    @transition(field=status, source=Status.PROCESSING, target=Status.PENDING, custom={"writes": _ENDS_LEASE})
    def release(self) -> None:
        # A worker shutting down hands its job back: not the file's fault, no attempt counted.
        self.lease_token = None
        self.lease_expires_at = None
        self.step = ""

    @transition(
        field=status,
        source=[Status.PENDING, Status.PROCESSING, Status.READY],
        target=Status.REJECTED,
        custom={"writes": _ENDS_LEASE_WITH_REASON},
    )
    def take_down(self, *, message: str) -> None:
        self.reason_code = ReasonCode.MODERATOR
        self.reason_message = message[:500]
        self.lease_token = None
        self.lease_expires_at = None
        self.step = ""

    @transition(
        field=status,
        source=Status.REJECTED,
        target=Status.PENDING,
        conditions=[_taken_down_by_moderator],
        custom={"writes": ("reason_code", "reason_message", "attempts")},
    )
    def restore(self) -> None:
        self.reason_code = ""
        self.reason_message = ""
        self.attempts = 0

    @transition(
        field=status,
        source=Status.READY,
        target=Status.REJECTED,
        custom={"writes": ("reason_code", "reason_message", "scan_signatures", "scanned_at")},
    )
    def reject_on_rescan(self, *, code: ReasonCode | str, message: str, signatures: str, now) -> None:
        # A ready file that newer signatures find: taken down without ever leaving `ready` before.
        self.reason_code = ReasonCode(code)
        self.reason_message = message[:500]
        self.scan_signatures = signatures[:300]
        self.scanned_at = now

    @transition(field=status, source=Status.READY, target=Status.PENDING, custom={"writes": ("attempts", "ready_at")})
    def rescan(self) -> None:
        self.attempts = 0
        self.ready_at = None


class RefHold(models.Model):
    """A retention (legal) hold on every file of one ref of a tenant, whenever it was committed there.

    Cleared holds stay as the record of who held what and when (cleared_at set);
    at most one active hold per (tenant, ref).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="ref_holds")
    ref = models.CharField(max_length=200)
    reason = models.CharField(max_length=500)
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField()
    cleared_by = models.CharField(max_length=150, blank=True, default="")
    cleared_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # Also the index of the delete paths' NOT EXISTS probe: (tenant, ref) among active holds.
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "ref"], condition=Q(cleared_at__isnull=True), name="refhold_active_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id}:{self.ref}" + (" (cleared)" if self.cleared_at else "")


class Derivative(models.Model):
    """A derived file (thumbnail, sanitized rendition). One per (attachment, kind)."""

    # derivative_once_per_kind leads with attachment_id; unique keys as constraints (see Attachment)
    attachment = models.ForeignKey(Attachment, on_delete=models.CASCADE, related_name="derivatives", db_index=False)
    kind = models.CharField(max_length=32)
    storage_key = models.CharField(max_length=512)
    content_type = models.CharField(max_length=127)
    size = models.BigIntegerField()
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["attachment", "kind"], name="derivative_once_per_kind"),
            models.UniqueConstraint(fields=["storage_key"], name="derivative_storage_key_unique"),
        ]


class VariantClaim(models.Model):
    """One variant being made, or lately failed: the single-flight token across processes and hosts.

    Inserting it is the claim (the unique constraint lets one insert win, on
    PostgreSQL and SQLite alike); the maker deletes it once the Derivative row
    exists, or marks it failed so that others answer 503 until `until` instead
    of retrying at once. A claim whose maker died is taken over past `until`.
    """

    attachment = models.ForeignKey(Attachment, on_delete=models.CASCADE, related_name="+", db_index=False)
    kind = models.CharField(max_length=32)  # the Derivative kind it makes, e.g. "variant:medium:webp"
    failed = models.BooleanField(default=False)
    until = models.DateTimeField()  # making: stale past it; failed: retried past it

    class Meta:
        constraints = [models.UniqueConstraint(fields=["attachment", "kind"], name="variant_claim_once")]


class TransitionLog(models.Model):
    """Append-only audit of an attachment: every status transition, lifecycle change and event, with its actor.

    One table, one timeline (the admin shows it in order). Status transitions
    hold statuses in from/to; lifecycle changes (services/transitions.py
    LIFECYCLE_EVENTS) hold lifecycle states; events that change neither
    (services/audit.py AUDIT_EVENTS: intent, arrived, scan, heartbeat) hold the
    status the file had. `details` carries an event's facts (size, digest, what
    the scan reported): new facts are new keys, no migration.
    """

    attachment = models.ForeignKey(Attachment, on_delete=models.CASCADE, related_name="transitions")
    transition = models.CharField(max_length=32)
    from_status = models.CharField(max_length=16)
    to_status = models.CharField(max_length=16)
    actor = models.CharField(max_length=150)
    reason_code = models.CharField(max_length=32, blank=True, default="")
    message = models.CharField(max_length=500, blank=True, default="")
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["created_at", "id"]


class Tombstone(models.Model):
    """What stays of an attachment after its row is hard-deleted, for AIRLOCK_RETENTION_DAYS.tombstones.

    Written by attachments/services/hard_delete.py in the transaction that deletes
    the row, one INSERT per batch. The row's audit history (TransitionLog) goes
    with the row; all of it is kept here (`history`), so "what happened to
    file X, and who did it" stays answerable after the purge. No foreign keys:
    the tombstone outlives the rows it would point at. Its own id grows with
    `purged_at`, so the retention purge walks the head of the primary key.
    """

    attachment_id = models.UUIDField()  # unique: tombstone_attachment_unique
    tenant_id = models.BigIntegerField()
    tenant_slug = models.CharField(max_length=63)
    owner_id = models.BigIntegerField(null=True, blank=True)
    subject = models.CharField(max_length=128, blank=True, default="")
    profile = models.CharField(max_length=32)
    storage_key = models.CharField(max_length=512)
    sha256 = models.CharField(max_length=64, blank=True, default="")
    size = models.BigIntegerField(null=True, blank=True)
    # The final state: status, reason and lifecycle as the row last had them.
    status = models.CharField(max_length=16)
    reason_code = models.CharField(max_length=32, blank=True, default="")
    reason_message = models.CharField(max_length=500, blank=True, default="")
    lifecycle = models.CharField(max_length=16)
    created_at = models.DateTimeField()
    ready_at = models.DateTimeField(null=True, blank=True)
    committed_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)  # soft delete (objects removed)
    purged_at = models.DateTimeField()  # hard delete (row removed)
    purged_by = models.CharField(max_length=150)
    # The audit timeline, every entry in order: [{"at", "event", "from", "to", "actor", "reason"?, "details"?,
    # "count"?, "until"?}, …]; a run of one repeated event is one entry with its count (services/hard_delete.py);
    # history_total is the number of rows it was made from.
    history = models.JSONField(default=list, blank=True)
    history_total = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["attachment_id"], name="tombstone_attachment_unique")]

    def __str__(self) -> str:
        return f"tombstone {self.attachment_id} ({self.status}/{self.lifecycle})"


class StorageEvent(models.Model):
    """Idempotent inbox of storage notifications (and local uploads)."""

    dedupe_key = models.CharField(max_length=700)  # unique: storageevent_dedupe_unique (see Attachment)
    source = models.CharField(max_length=16)  # local | webhook | sqs | complete | reconcile
    event_name = models.CharField(max_length=64)
    bucket = models.CharField(max_length=255, blank=True, default="")
    key = models.CharField(max_length=1024)
    size = models.BigIntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=32, blank=True, default="")
    attachment = models.ForeignKey(Attachment, null=True, blank=True, on_delete=models.SET_NULL)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dedupe_key"], name="storageevent_dedupe_unique")]


class RescanCheckpoint(models.Model):
    """Where the background rescan's walk got to (a singleton row, pk=1): resumable across restarts.

    The walk goes over ready files newest first (created_at, id descending) and
    queues a rescan for those whose recorded signatures are not `version`.
    """

    SINGLETON_PK = 1

    id = models.PositiveSmallIntegerField(primary_key=True, default=SINGLETON_PK, editable=False)
    version = models.CharField(max_length=300, blank=True, default="")  # the signatures the walk is for
    cursor_created_at = models.DateTimeField(null=True, blank=True)  # the last file queued
    cursor_id = models.UUIDField(null=True, blank=True)
    queued = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    budget_at = models.DateTimeField(null=True, blank=True)  # the rate budget is counted from here

    def __str__(self) -> str:
        return f"rescan {self.version or '-'}: {self.queued} queued"


class JobsHeartbeat(models.Model):
    """The running `serve`'s job side says it is alive, in the database a command can read.

    On the embedded default the worker registry lives in serve's memory; a
    management command in another process reads this row to know whether a
    serve will relay the jobs it leaves in the outbox (attachments/services/handoff.py).
    """

    name = models.CharField(max_length=32, primary_key=True)
    holder = models.CharField(max_length=200, blank=True, default="")
    beat_at = models.DateTimeField()
    in_process_broker = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"{self.name} @ {self.beat_at:%H:%M:%S}"


class QueueConsumerState(models.Model):
    """A storage-event queue consumer's last look at its queue, for /readyz and /metrics.

    The consumer runs in its own process; the web processes read its lag here.
    """

    name = models.CharField(max_length=200, primary_key=True)  # "cloudflare:<account>/<queue>"
    backlog = models.BigIntegerField(null=True, blank=True)  # messages waiting, as the queue reported it
    polled_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)  # a clean stop; None while it runs

    def __str__(self) -> str:
        return f"{self.name}: backlog {self.backlog}"


class OutboxMessage(models.Model):
    """A job enqueued in the same transaction as the state change that calls for it."""

    actor_name = models.CharField(max_length=64)
    queue_name = models.CharField(max_length=64)
    args = models.JSONField(default=list)
    delay_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    send_attempts = models.PositiveIntegerField(default=0)
    request_id = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["sent_at", "created_at"], name="outbox_unsent")]


class DeadLetter(models.Model):
    """Work that ran out of automatic retries and now needs a human."""

    class Kind(models.TextChoices):
        PROCESSING = "processing"
        MESSAGE = "message"
        SWEEP = "sweep"
        RENDITION = "rendition"  # a ready video's web rendition ran out of attempts (the file stays ready)

    kind = models.CharField(max_length=16, choices=Kind.choices)
    attachment = models.ForeignKey(
        Attachment, null=True, blank=True, on_delete=models.SET_NULL, related_name="dead_letters"
    )
    storage_key = models.CharField(max_length=1024, blank=True, default="")
    last_error = models.TextField(blank=True, default="")
    history = models.JSONField(default=list, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["resolved_at"], name="deadletter_open")]


class TusUpload(models.Model):
    """A resumable (tus 1.0) upload in progress: how far it got and where its bytes wait.

    The attachment row is the intent, created exactly like any other; this row only
    tracks the transfer. The offset is the server's word: on local storage the
    staging file is truncated back to it, on S3 it is the bytes in the parts plus
    the tail (kept here, so a restart loses nothing the client was told it has).
    """

    class State(models.TextChoices):
        ACTIVE = "active"
        COMPLETE = "complete"
        TERMINATED = "terminated"
        EXPIRED = "expired"

    attachment = models.OneToOneField(Attachment, primary_key=True, on_delete=models.CASCADE, related_name="tus")
    length = models.BigIntegerField()
    offset = models.BigIntegerField(default=0)
    state = models.CharField(max_length=16, choices=State.choices, default=State.ACTIVE)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    # S3: the multipart upload behind the scenes (empty until the first full part),
    # the parts uploaded so far ([number, etag, size]), and the bytes after them
    # (shorter than a part: S3 refuses parts under 5 MiB but the last).
    s3_upload_id = models.CharField(max_length=1024, blank=True, default="")
    parts = models.JSONField(default=list, blank=True)
    tail = models.BinaryField(default=b"", blank=True)
    # One PATCH at a time: a claim with a heartbeat, not a row lock held for the
    # length of a body (that would pin a database connection per upload).
    lock_token = models.UUIDField(null=True, blank=True)
    locked_at = models.DateTimeField(null=True, blank=True)
    # Bytes may still wait in staging (a file, or S3 parts); false once completed or removed.
    staged = models.BooleanField(default=True)

    class Meta:
        indexes = [models.Index(fields=["expires_at"], name="tus_staged_expiry", condition=Q(staged=True))]

    def __str__(self) -> str:
        return f"tus:{self.attachment_id} {self.offset}/{self.length} ({self.state})"
