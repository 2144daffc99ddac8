"""What a client token may call: one allowlist, closed by default.

Applied to every API view by REST_FRAMEWORK's DEFAULT_PERMISSION_CLASSES (and
added by views that name their own permissions). A view opens itself to client
tokens by declaring `client_token_allowed = True`, or a set of the methods it
opens; any other view answers `403 CLIENT_TOKEN_SCOPE` to a client token, so a
new view is closed until it says otherwise. What the grant allows inside an
open view (profiles, the ref, the budget) is checked by the services
(services/client_grants.py).
"""

from __future__ import annotations

from collections.abc import Collection

from rest_framework.permissions import BasePermission

from ..errors import OutOfScope
from ..subjects import client_token_of

ALLOW_ATTRIBUTE = "client_token_allowed"


def client_token_may_call(view, method: str) -> bool:
    allowed: bool | Collection[str] = getattr(view, ALLOW_ATTRIBUTE, False)
    if isinstance(allowed, bool):
        return allowed
    return method.upper() in allowed


class ClientTokenScope(BasePermission):
    """Any caller but a client token passes; a client token only into views that allow it."""

    def has_permission(self, request, view) -> bool:
        if client_token_of(request.user) is None or client_token_may_call(view, request.method):
            return True
        raise OutOfScope()
