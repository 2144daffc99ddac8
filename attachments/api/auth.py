"""`Authorization: Token <key>`, the contract's one scheme for API tokens.

Keys are looked up by digest (attachments.services.tokens). `Bearer` is refused
with a message naming the right scheme rather than silently ignored: Bearer is
what the storage-events and metrics endpoints take, and an API client sending it
should learn why it is not signed in.
"""

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication, get_authorization_header

from ..services.tokens import api_token_find


class ApiTokenAuthentication(TokenAuthentication):
    keyword = "Token"

    def authenticate(self, request):
        scheme = get_authorization_header(request).split(b" ", 1)[0]
        if scheme.lower() == b"bearer":
            raise exceptions.AuthenticationFailed(
                "API tokens use `Authorization: Token <key>`; the Bearer scheme is not accepted.")
        return super().authenticate(request)

    def authenticate_credentials(self, key):
        token = api_token_find(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return (token.user, token)
