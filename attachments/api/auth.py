"""`Authorization: Token <key>`, the contract's scheme for API tokens; client tokens also as `Bearer`.

Keys are looked up by digest (attachments/services/tokens.py,
attachments/client_tokens/services/client_tokens.py): a key starting `act_` is
a client token, anything else an API token. `Bearer` never authenticates an API
token: it is what the storage-events and metrics endpoints take. A request
carrying it with an API token is anonymous (public endpoints such as the schema
still answer), and where sign-in is required the 401 names the right scheme
instead of saying no credentials were given (api/errors.py). Browser libraries
send `Bearer`, so a client token is accepted with either scheme.
"""

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication, get_authorization_header

from ..client_tokens.services.client_tokens import client_token_find, is_client_key
from ..errors import OutOfScope
from ..services.tokens import api_token_find
from ..subjects import SUBJECT_META_KEY, act_for, parse_subject

WRONG_SCHEME_MESSAGE = "API tokens use `Authorization: Token <key>`; the Bearer scheme is not accepted."
CLIENT_TOKEN_INVALID = "Invalid, expired or revoked client token."


class ApiTokenAuthentication(TokenAuthentication):
    keyword = "Token"

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        scheme = parts[0].lower() if parts else b""
        if len(parts) == 2 and scheme in (b"token", b"bearer") and parts[1].startswith(b"act_"):
            return self._client_token(request, parts[1])
        if scheme == b"bearer":
            request.airlock_wrong_scheme = True
            return None
        found = super().authenticate(request)
        if found is not None:
            # A service token acts for one of the host's people with `Airlock-Subject`.
            header = request.META.get(SUBJECT_META_KEY)
            act_for(found[0], subject=None if header is None else parse_subject(header, field="Airlock-Subject"))
        return found

    def _client_token(self, request, raw: bytes):
        try:
            key = raw.decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed(CLIENT_TOKEN_INVALID) from None
        token = client_token_find(key) if is_client_key(key) else None
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed(CLIENT_TOKEN_INVALID)
        header = request.META.get(SUBJECT_META_KEY)
        if header is not None and header != token.subject:
            # The token names its subject; a device cannot act for anybody else.
            raise OutOfScope(
                "A client token acts only for the subject it was minted for.",
                details={"Airlock-Subject": ["Not this token's subject (omit the header)."]},
            )
        act_for(token.user, subject=token.subject, client_token=token)
        return (token.user, token)

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
