from rest_framework.authentication import TokenAuthentication


class BearerTokenAuthentication(TokenAuthentication):
    """`Authorization: Token <key>` (the contract); `Bearer <key>` is accepted too."""

    def authenticate_credentials(self, key):
        # One query for the token, its user and the user's tenant: every API
        # request needs all three.
        from rest_framework import exceptions
        from rest_framework.authtoken.models import Token

        try:
            token = Token.objects.select_related("user__membership__tenant").get(key=key)
        except Token.DoesNotExist:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return (token.user, token)

    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if header[:7].lower() == "bearer ":
            request.META["HTTP_AUTHORIZATION"] = "Token " + header[7:]
        return super().authenticate(request)
