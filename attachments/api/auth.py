"""`Authorization: Token <key>`, the contract's one scheme for API tokens.

Keys are looked up by digest (attachments.services.tokens). `Bearer` never
authenticates a user: it is what the storage-events and metrics endpoints take.
A request carrying it is anonymous (public endpoints such as the schema still
answer), and where sign-in is required the 401 names the right scheme instead
of saying no credentials were given (api/errors.py).
"""

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication, get_authorization_header

from ..services.tokens import api_token_find
from ..subjects import SUBJECT_META_KEY, act_for, parse_subject

WRONG_SCHEME_MESSAGE = "API tokens use `Authorization: Token <key>`; the Bearer scheme is not accepted."


class ApiTokenAuthentication(TokenAuthentication):
    keyword = "Token"

    def authenticate(self, request):
        if get_authorization_header(request).split(b" ", 1)[0].lower() == b"bearer":
            request.airlock_wrong_scheme = True
            return None
        found = super().authenticate(request)
        if found is not None:
            # A service token acts for one of the host's people with `Airlock-Subject`.
            header = request.META.get(SUBJECT_META_KEY)
            act_for(found[0], subject=None if header is None else parse_subject(header, field="Airlock-Subject"))
        return found

    def authenticate_credentials(self, key):
        token = api_token_find(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return (token.user, token)


def wrong_scheme(request) -> bool:
    """Whether the request was refused for sending Bearer instead of Token."""
    return bool(getattr(request, "airlock_wrong_scheme", False))
