"""What every API module shares: strict input fields, errors, the attachment resource.

SharedSerializer (every API serializer's base) is the rendering fast path, in fastpath_serializer.py.

Each view declares its own InputSerializer/OutputSerializer next to itself;
the OpenAPI schema is generated from them (schema.py keeps only what cannot be
derived).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers
from rest_framework.fields import SkipField

from .. import renditions
from ..models import Approval, Attachment, Lifecycle, Status
from ..reasons import ReasonCode
from ..selectors import guest_of_unapproved, is_held, preview_read, servable_now
from ..signing import delivery_expiry, delivery_query
from ..variants.spec import signed_name, variant_sizes
from .fastpath_serializer import SharedSerializer
from .links import absolute_url

# --- strict input fields ---------------------------------------------------------------


class StrictIntegerField(serializers.IntegerField):
    """JSON numbers only: "123", true and 1.5 are type errors, not sizes."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class UtcDateTimeField(serializers.DateTimeField):
    """ISO 8601 in UTC with a `Z`: the contract's one format (docs/api.md), whatever TIME_ZONE says."""

    def __init__(self, **kwargs):
        super().__init__(default_timezone=UTC, **kwargs)


# --- errors -------------------------------------------------------------------------------


@extend_schema_serializer(component_name="ErrorDetail")
class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(
        help_text="Machine-readable; each operation's error responses name the codes it can answer with."
    )
    message = serializers.CharField(help_text="Human-readable explanation.")
    details = serializers.DictField(
        child=serializers.JSONField(),
        help_text="Field → messages for VALIDATION_ERROR, id → reason for ATTACHMENT_INVALID, "
        "limits for TOO_LARGE and RATE_LIMITED, {quota, used, limit, requested} for QUOTA_EXCEEDED; "
        "empty otherwise.",
    )


@extend_schema_serializer(component_name="Error")
class ErrorSerializer(serializers.Serializer):
    # The one shape of every 4xx/5xx body, rendered by errors.error_body.

    error = ErrorDetailSerializer()


# --- the attachment resource ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AttachmentResource:
    """One attachment as one caller may see it; what depends on the caller comes from the selectors.

    The properties are the resource's rules (docs/api.md, "The attachment
    resource"); AttachmentOutputSerializer writes them out.
    """

    attachment: Attachment
    url: str  # the resource's absolute URL
    can_read: bool = False
    thumbnail: dict | None = None  # {"width", "height"} of a thumbnail the caller may read
    now: datetime | None = None  # when `available` is judged (a webhook's event time); None: when rendered
    # The file waits for approval and the caller is not its guest (selectors.full_size_refused): only its
    # previews may be read, so neither `available` nor a full-size link is shown.
    full_size_refused: bool = False
    status: str = field(init=False)  # read once: the model's FSM descriptor is not free

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", self.attachment.status)

    @property
    def available(self) -> bool:
        # Whoever reads the resource: whether its owner's download would succeed now; a guest's file
        # waiting for approval is downloaded by its guest only.
        return not self.full_size_refused and servable_now(self.attachment, self.now)

    def _may_read(self, name: str) -> bool:
        """Whether the caller may read rendition `name` now (a file that waits for approval: previews only)."""
        return self.can_read and not (self.full_size_refused and not preview_read(name))

    @property
    def reason(self) -> Attachment | None:
        return self.attachment if self.status in (Status.REJECTED, Status.FAILED) else None

    # Facts about the bytes are known once processing accepted them.
    @property
    def size(self) -> int | None:
        return self.attachment.size if self.status == Status.READY else None

    @property
    def content_type(self) -> str | None:
        return (self.attachment.content_type or None) if self.status == Status.READY else None

    @property
    def sha256(self) -> str | None:
        return (self.attachment.sha256 or None) if self.status == Status.READY else None

    @property
    def duplicate_of(self):
        return self.attachment.duplicate_of if self.status == Status.READY else None

    @property
    def expires_at(self):
        return None if self.committed else self.attachment.expires_at

    @property
    def committed(self) -> bool:
        return self.attachment.lifecycle == Lifecycle.COMMITTED

    @property
    def legal_hold(self) -> bool:
        return is_held(self.attachment)

    @property
    def derivatives(self) -> dict[str, Any]:
        derivatives: dict[str, Any] = {}
        if self.thumbnail is not None:
            derivatives["thumbnail"] = {"width": self.thumbnail["width"], "height": self.thumbnail["height"]}
        meta = self.attachment.metadata or {}
        if self.status == Status.READY:
            if "entries" in meta:
                derivatives["entries"] = {"count": meta.get("entries"), "total_bytes": meta.get("total_bytes")}
            if meta.get("page_count") is not None:
                derivatives["page_count"] = meta.get("page_count")
            for kind in ("display", "poster"):  # HEIC/HEIF/AVIF; video
                if self._may_read(kind) and isinstance(meta.get(kind), dict):
                    derivatives[kind] = {"width": meta[kind].get("width"), "height": meta[kind].get("height")}
        return derivatives

    @property
    def metadata(self) -> dict[str, Any]:
        return self.attachment.metadata or {}

    @property
    def renditions(self) -> dict[str, Any] | None:
        """Videos, once ready: the web rendition's state, from the row (no query of its own)."""
        return renditions.shown(self.attachment.metadata) if self.status == Status.READY else None

    @property
    def links(self) -> dict[str, Any]:
        links: dict[str, Any] = {"self": self.url}
        if self.can_read:
            names = ["download"] if self._may_read("download") else []
            if self.thumbnail is not None and self._may_read("thumbnail"):
                names.append("thumbnail")
            names += [kind for kind in ("display", "poster") if kind in self.derivatives]
            shown = self.renditions
            if (
                shown is not None
                and shown[renditions.WEB]["status"] == renditions.READY
                and self._may_read(renditions.WEB)
            ):
                names.append(renditions.WEB)
            # Signed, so an <img src> needs no header (attachments/signing.py); one expiry for
            # the whole resource, rounded so that re-reading it gives the same links.
            exp = delivery_expiry()
            attachment = self.attachment
            # Shown to the guest of a file waiting for approval: links that read it full size, as its guest.
            guest = "" if self.full_size_refused else guest_of_unapproved(attachment)
            for name in names:
                query = delivery_query(
                    tenant_id=attachment.tenant_id, attachment_id=attachment.pk, name=name, exp=exp, guest=guest
                )
                links[name] = f"{self.url}/{name}?{query}"
            if self.status == Status.READY:  # made on first request, so listed before they exist
                variants = {}
                for name in variant_sizes(attachment.profile, attachment.content_type):
                    if not self._may_read(signed_name(name)):
                        continue
                    query = delivery_query(
                        tenant_id=attachment.tenant_id,
                        attachment_id=attachment.pk,
                        name=signed_name(name),
                        exp=exp,
                        guest=guest,
                    )
                    variants[name] = f"{self.url}/variants/{name}?{query}"
                if variants:
                    links["variants"] = variants
        return links


class _ArchivesOnly(serializers.IntegerField):
    """Written (possibly null) for archives, whose metadata has `entries`; left out for everything else."""

    def get_attribute(self, instance):
        if "entries" not in instance:
            raise SkipField()
        return super().get_attribute(instance)


class _MediaOnly:
    """Written (possibly null) for video and audio, whose metadata has `duration_seconds`; left out otherwise."""

    def get_attribute(self, instance):
        if "duration_seconds" not in instance:
            raise SkipField()
        return super().get_attribute(instance)


class _RenditionsField(serializers.DictField):
    """Written for videos once ready (their `renditions`); left out for everything else."""

    def get_attribute(self, instance):
        value = super().get_attribute(instance)
        if value is None:
            raise SkipField()
        return value


class _MediaInt(_MediaOnly, serializers.IntegerField):
    pass


class _MediaFloat(_MediaOnly, serializers.FloatField):
    pass


class _MediaStr(_MediaOnly, serializers.CharField):
    pass


@extend_schema_serializer(component_name="Reason")
class ReasonOutputSerializer(SharedSerializer):
    code = serializers.CharField(source="reason_code", help_text=f"One of: {', '.join(ReasonCode.values)}.")
    message = serializers.CharField(source="reason_message", allow_blank=True)


@extend_schema_serializer(component_name="Links")
class LinksOutputSerializer(SharedSerializer):
    self = serializers.URLField()
    download = serializers.URLField(
        required=False,
        help_text="Present only when the caller may read the file (a guest's file waiting for approval: "
        "to its guest only). Every file link is signed "
        "(`?exp=…&kid=…&sig=…`): it works without `Authorization` until `exp`, and only while the file is served.",
    )
    thumbnail = serializers.URLField(required=False, help_text="Present only when a thumbnail may be read.")
    display = serializers.URLField(
        required=False, help_text="HEIC/HEIF/AVIF only: the browser-viewable rendition, when it may be read."
    )
    poster = serializers.URLField(
        required=False,
        help_text="Video only: one frame near 1 s (WebP, long edge at most 1280 px), when it may be read.",
    )
    web = serializers.URLField(
        required=False,
        help_text="Video only, once its web rendition is `ready` (H.264 + AAC in MP4, long edge at most 1920 px): "
        "what a `<video src>` should play, when it may be read.",
    )
    variants = serializers.DictField(
        child=serializers.URLField(),
        required=False,
        help_text="Ready files of a profile with variants (AIRLOCK_VARIANTS), when they may be read: name → signed "
        "link, e.g. `small`, `medium`, `large` (fit within 640/1280/2048 px, never upscaled; WebP, or JPEG when "
        "`Accept` lacks image/webp). Made on the first request.",
    )


@extend_schema_serializer(component_name="AttachmentMetadata")
class MetadataOutputSerializer(SharedSerializer):
    width = serializers.IntegerField(allow_null=True)
    height = serializers.IntegerField(allow_null=True)
    page_count = serializers.IntegerField(allow_null=True)
    entries = _ArchivesOnly(allow_null=True, required=False, help_text="Archives only.")
    total_bytes = _ArchivesOnly(allow_null=True, required=False, help_text="Archives only.")
    container = _MediaStr(allow_null=True, required=False, help_text="Video/audio only: FFmpeg's demuxer name.")
    duration_seconds = _MediaFloat(allow_null=True, required=False, help_text="Video/audio only, from the headers.")
    rotation = _MediaInt(
        allow_null=True,
        required=False,
        help_text="Video only: degrees clockwise the stored frames are turned to be shown.",
    )
    video_codec = _MediaStr(allow_null=True, required=False, help_text="Video/audio only.")
    frame_rate = _MediaFloat(allow_null=True, required=False, help_text="Video/audio only: frames per second.")
    audio_codec = _MediaStr(allow_null=True, required=False, help_text="Video/audio only.")
    audio_channels = _MediaInt(allow_null=True, required=False, help_text="Video/audio only.")
    audio_sample_rate = _MediaInt(allow_null=True, required=False, help_text="Video/audio only: Hz.")
    bit_rate = _MediaInt(allow_null=True, required=False, help_text="Video/audio only: bits per second, overall.")
    stream_count = _MediaInt(allow_null=True, required=False, help_text="Video/audio only.")


@extend_schema_serializer(component_name="Attachment")
class AttachmentOutputSerializer(SharedSerializer):
    # Renders an AttachmentResource: the attachment resource of docs/api.md.

    id = serializers.UUIDField(source="attachment.pk")
    subject = serializers.CharField(
        source="attachment.subject",
        help_text="The host's id for the person the file is for (`Airlock-Subject`), or the owner's username.",
    )
    profile = serializers.CharField(source="attachment.profile")
    status = serializers.ChoiceField(choices=Status.choices)
    available = serializers.BooleanField(
        help_text="True exactly when the file can be downloaded now: `ready`, and neither discarded, released, "
        "deleted nor an expired draft; a guest's file waiting for approval (`pending`, `declined`) only to its "
        "guest. A `ready` file can be unavailable; nothing else is ever available."
    )
    reason = ReasonOutputSerializer(allow_null=True, help_text="Null unless rejected or failed.")
    filename = serializers.CharField(source="attachment.filename")
    size = serializers.IntegerField(allow_null=True, help_text="Bytes served by `download` (null until ready).")
    content_type = serializers.CharField(allow_null=True, help_text="Detected from the bytes (null until ready).")
    sha256 = serializers.CharField(allow_null=True, help_text="Of the served bytes (null until ready).")
    duplicate_of = serializers.UUIDField(
        allow_null=True,
        help_text="The id of an earlier available file with the same `sha256` in the same ref (or of the same "
        "subject, for a file without a ref), as found when this one became ready or was committed; null otherwise.",
    )
    created_at = UtcDateTimeField(source="attachment.created_at")
    ready_at = UtcDateTimeField(source="attachment.ready_at", allow_null=True)
    expires_at = UtcDateTimeField(
        allow_null=True, help_text="Null once committed; for a released file, the end of its grace."
    )
    committed = serializers.BooleanField()
    lifecycle = serializers.ChoiceField(
        source="attachment.lifecycle",
        choices=Lifecycle.choices,
        help_text="Where the file is in its life; `links` name only what is servable now.",
    )
    ref = serializers.CharField(source="attachment.ref", allow_null=True)
    legal_hold = serializers.BooleanField(
        help_text="True while platform staff hold the file (or its ref): every delete answers 409 LEGAL_HOLD."
    )
    approval = serializers.ChoiceField(
        source="attachment.approval",
        choices=Approval.choices,
        help_text="`not_required` unless sent through an upload link that requires approval: then `pending` until "
        "its host approves (committed to the link's ref once ready) or declines (removed).",
    )
    derivatives = serializers.DictField(
        child=serializers.JSONField(),
        help_text='Per kind, e.g. {"thumbnail": {"width": 256, "height": 192}}, "display" (HEIC/HEIF/AVIF), '
        '"poster" (video), "page_count", "entries".',
    )
    metadata = MetadataOutputSerializer()
    renditions = _RenditionsField(
        child=serializers.JSONField(),
        required=False,
        help_text='Video only, once ready: {"web": {"status", "progress", "codec", "width", "height", "bytes"}}. '
        "`status` is `pending` (being made; `progress` 0–1), `ready` (`links.web` plays it), `failed`, or "
        "`not_needed` (the download plays in every browser as it is).",
    )
    links = LinksOutputSerializer()


def attachment_resource(
    attachment: Attachment,
    request,
    *,
    can_read: bool,
    thumbnail=None,
    now: datetime | None = None,
    full_size_refused: bool = False,
) -> dict:
    """The attachment resource of docs/api.md for a caller who may (or may not) read the file."""
    url = absolute_url(request, f"/api/v1/attachments/{attachment.pk}")
    return AttachmentOutputSerializer.render(
        AttachmentResource(attachment, url, can_read, thumbnail, now, full_size_refused)
    )
