"""Input validation (strict JSON types) and the attachment resource."""

from __future__ import annotations

import functools
from typing import Any

from django.core import validators as django_validators
from rest_framework import serializers
from rest_framework import validators as drf_validators

from ..models import Attachment, Lifecycle, Status
from .links import absolute_url


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


class IntentRequest(serializers.Serializer):
    profile = StrictCharField(max_length=64)
    filename = StrictCharField(max_length=1024, trim_whitespace=False)
    size = StrictIntegerField(min_value=0, max_value=2**62)
    content_type = StrictCharField(max_length=255)


# Validators a strict field adds by itself from its arguments; anything else
# (a custom validator) keeps the serializer off the fast path below.
_BUILT_IN_VALIDATORS = (
    django_validators.MaxLengthValidator, django_validators.MinLengthValidator,
    django_validators.MaxValueValidator, django_validators.MinValueValidator,
    django_validators.ProhibitNullCharactersValidator, drf_validators.ProhibitSurrogateCharactersValidator,
)


@functools.cache
def _plain_plan(serializer_class: type[serializers.Serializer]) -> tuple | None:
    """(name, field) pairs when every field is a required strict string or integer, else None."""
    serializer = serializer_class()
    overridden = (type(serializer).validate is not serializers.Serializer.validate
                  or any(hasattr(serializer, f"validate_{name}") for name in serializer.fields))
    plan = []
    for name, field in serializer.fields.items():
        if (type(field) not in (StrictCharField, StrictIntegerField) or not field.required or field.allow_null
                or field.read_only or field.source != name
                or not all(isinstance(v, _BUILT_IN_VALIDATORS) for v in field.validators)):
            return None
        plan.append((name, field))
    return None if overridden or not plan else tuple(plan)


def plain_validated_data(serializer_class: type[serializers.Serializer], data: object) -> dict | None:
    """What the serializer would validate `data` to, when that is plain to see; None means "ask it".

    Building a DRF serializer deep-copies and binds its fields on every request,
    which costs more than checking a small flat body (bench/api.py, intents).
    This only accepts what the serializer itself accepts, unchanged (exact
    types, ASCII text with no NUL, within the field's own bounds), so its
    answer is the serializer's; anything else, including every error, goes
    through the serializer for the contract's messages.
    """
    plan = _plain_plan(serializer_class)
    if plan is None or type(data) is not dict:
        return None
    validated = {}
    for name, field in plan:
        value = data.get(name)
        if type(field) is StrictIntegerField:
            if type(value) is not int or (field.min_value is not None and value < field.min_value) \
                    or (field.max_value is not None and value > field.max_value):
                return None
        else:
            if type(value) is not str or not value.isascii() or "\x00" in value:
                return None
            if field.trim_whitespace:
                value = value.strip()
            if not value or (field.max_length is not None and len(value) > field.max_length) \
                    or (field.min_length is not None and len(value) < field.min_length):
                return None
        validated[name] = value
    return validated


class IdsRequest(serializers.Serializer):
    ids = serializers.ListField(child=StrictCharField(max_length=64, allow_blank=True), max_length=1000,
                                allow_empty=False)


class CommitRequest(IdsRequest):
    ref = StrictCharField(max_length=200)


def _iso(value):
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z")


def attachment_resource(attachment: Attachment, request, *, can_read: bool, thumbnail=None) -> dict:
    """The attachment resource of API.md."""
    self_url = absolute_url(request, f"/api/v1/attachments/{attachment.pk}")
    links = {"self": self_url}
    if can_read:
        links["download"] = f"{self_url}/download"
        if thumbnail is not None:
            links["thumbnail"] = f"{self_url}/thumbnail"
    reason = None
    if attachment.status in (Status.REJECTED, Status.FAILED):
        reason = {"code": attachment.reason_code, "message": attachment.reason_message}
    derivatives: dict[str, Any] = {}
    if thumbnail is not None:
        derivatives["thumbnail"] = {"width": thumbnail["width"], "height": thumbnail["height"]}
    meta = attachment.metadata or {}
    if attachment.status == Status.READY and "entries" in meta:
        derivatives["entries"] = {"count": meta.get("entries"), "total_bytes": meta.get("total_bytes")}
    if attachment.status == Status.READY and meta.get("page_count") is not None:
        derivatives["page_count"] = meta.get("page_count")
    metadata = {"width": meta.get("width"), "height": meta.get("height"), "page_count": meta.get("page_count")}
    if "entries" in meta:
        metadata.update({"entries": meta.get("entries"), "total_bytes": meta.get("total_bytes")})
    facts_known = attachment.status == Status.READY
    return {
        "id": str(attachment.pk),
        "profile": attachment.profile,
        "status": attachment.status,
        "reason": reason,
        "filename": attachment.filename,
        "size": attachment.size if facts_known else None,
        "content_type": (attachment.content_type or None) if facts_known else None,
        "sha256": (attachment.sha256 or None) if facts_known else None,
        "created_at": _iso(attachment.created_at),
        "ready_at": _iso(attachment.ready_at),
        "expires_at": None if attachment.lifecycle == Lifecycle.COMMITTED else _iso(attachment.expires_at),
        "committed": attachment.lifecycle == Lifecycle.COMMITTED,
        "ref": attachment.ref,
        "derivatives": derivatives,
        "metadata": metadata,
        "links": links,
    }
