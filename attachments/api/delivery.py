"""The two credentials of a file read: the caller's own (header or session), or a signed link.

An API client sends `Authorization: Token` and reads as itself. An `<img src>`
sends nothing: the link's `exp`, `kid` and `sig` (attachments/signing.py)
stand for a read by the attachment's tenant, checked against the gate at every
request (selectors). A request carrying both is served when either allows it.
Neither ever reads a file that is not `ready`: its owner learns 409 NOT_READY,
everyone else 404.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.permissions import BasePermission

from ..errors import NotAuthenticated, NotFound
from ..models import Attachment
from ..selectors import attachment_for_download, attachment_for_signed_read, unapproved_read_refused
from ..signing import delivery_signed


def _signed_in(request) -> bool:
    return request.user is not None and request.user.is_authenticated


class SignedOrAuthenticated(BasePermission):
    """Signed in, or trying a signed link (which the view then verifies); else the usual 401."""

    def has_permission(self, request, view) -> bool:
        return _signed_in(request) or delivery_signed(request.query_params)


def readable_attachment(request, *, attachment_id: object, name: str) -> Attachment:
    """The attachment whose `name` rendition this request may read, or NotFound/NotReady/SignatureInvalid/UrlExpired.

    Either credential suffices. The caller's own read comes first; when it refuses
    and the request carries a link's signature, the link decides, as it would for
    anyone holding it without a header (a tenant-less staff session in the same
    browser, say): refusing a signed-in holder what an anonymous one gets would
    protect nothing. The owner's NotReady stands: no link serves that file either.
    """
    signed = delivery_signed(request.query_params)
    if _signed_in(request):
        try:
            found = attachment_for_download(user=request.user, attachment_id=attachment_id)
        except (NotFound, NotAuthenticated):
            if not signed:
                raise
        else:
            if unapproved_read_refused(user=request.user, attachment=found, name=name):
                raise NotFound()  # waits for approval: as if it did not exist yet
            return found
    query = request.query_params
    found, for_guest = attachment_for_signed_read(
        attachment_id=attachment_id, name=name, exp=query.get("exp"), kid=query.get("kid"), sig=query.get("sig")
    )
    # A link minted for the guest of a file waiting for approval reads it as that guest does.
    if not for_guest and unapproved_read_refused(user=None, attachment=found, name=name):
        raise NotFound()
    return found


SIGNED_LINK_NAMES = frozenset({"exp", "kid", "sig"})  # the query parameters a file read takes
SIGNED_LINK_PARAMETERS = [
    OpenApiParameter(
        "exp",
        OpenApiTypes.INT,
        OpenApiParameter.QUERY,
        description="Signed link: when it expires (Unix seconds), as in the resource's `links`.",
    ),
    OpenApiParameter(
        "kid", OpenApiTypes.STR, OpenApiParameter.QUERY, description="Signed link: the id of the key that signed it."
    ),
    OpenApiParameter(
        "sig",
        OpenApiTypes.STR,
        OpenApiParameter.QUERY,
        description="Signed link: the signature. With `exp` and `kid`, the credential of a request "
        "that sends no `Authorization` (an `<img src>`): 403 `SIGNATURE_INVALID` or `URL_EXPIRED` "
        "when it does not hold and the request's own credential does not allow the read either.",
    ),
]
