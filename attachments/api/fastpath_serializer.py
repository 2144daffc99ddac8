"""The API's serializer fast path: one built instance per serializer class, shared by requests.

DRF builds a serializer per request: `Serializer.fields` -> `get_fields()` deep-copies
and binds every declared field: a status read would take about a third more CPU.
SharedSerializer.validate_body/render call DRF's own public
run_validation/to_representation on one instance per class, built once (`_shared`);
bench/tricks_bench.py measures it with and without.

What it leans on in DRF (tests/api/test_resource_fast_path.py fails when that changes;
pyproject pins DRF 3.x): run_validation and to_representation store nothing on the
instance, and a bound field keeps no per-call state. So a shared instance is read-only:
no `data=`, `instance=` or `context` is ever given to it, and whatever depends on the
request travels inside the value rendered (serializers.AttachmentResource); safe under
`serve`'s threads.
"""

from __future__ import annotations

import functools
from typing import Any

from rest_framework import serializers

from ..errors import ValidationFailed


@functools.cache
def _shared(serializer_class: type[serializers.Serializer]) -> serializers.Serializer:
    serializer = serializer_class()
    serializer.fields  # noqa: B018 - built and bound here, once, never again per request
    return serializer


class SharedSerializer(serializers.Serializer):
    # A comment, not a docstring: drf-spectacular would publish a docstring
    # as every component's description.

    @classmethod
    def validate_body(cls, data: object) -> dict[str, Any]:
        """`cls(data=data).is_valid(raise_exception=True)`'s validated_data.

        A body that is not a JSON object is a 400 too.
        """
        if not isinstance(data, dict):
            raise ValidationFailed(
                "The body must be a JSON object.", details={"non_field_errors": ["Expected an object."]}
            )
        return _shared(cls).run_validation(data)

    @classmethod
    def render(cls, value: object) -> dict[str, Any]:
        """`cls(value).data`, as a plain dict."""
        return _shared(cls).to_representation(value)
