"""Query parameters: each reading view declares the ones it takes, and any other is refused by name.

A parameter the API does not know is a client's mistake (a typo, a filter this
version lacks): ignoring it would answer something else than was asked, e.g.
every file for `?ref=…` before lists took `ref`. docs/api.md, "Errors".
"""

from __future__ import annotations

from collections.abc import Collection
from typing import ClassVar

from ..errors import ValidationFailed

_READS = frozenset({"GET", "HEAD"})


def refuse_unknown_parameters(query: Collection[str], allowed: Collection[str]) -> None:
    """400 VALIDATION_ERROR naming each query parameter not in `allowed`."""
    unknown = sorted(set(query) - set(allowed))
    if unknown:
        raise ValidationFailed(
            f"Unknown query parameter{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}.",
            details={name: ["Unknown query parameter."] for name in unknown},
        )


class DeclaredQuery:
    """An APIView mixin: its GET (and HEAD) take exactly `query_parameters`; another answers 400.

    Checked once the request is authenticated and permitted (initial()), so an
    anonymous request still learns 401 first.
    """

    query_parameters: ClassVar[frozenset[str]] = frozenset()

    def initial(self, request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        if request.method in _READS:
            refuse_unknown_parameters(request.query_params, self.query_parameters)
