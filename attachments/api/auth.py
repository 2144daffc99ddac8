from rest_framework.authentication import TokenAuthentication


class BearerTokenAuthentication(TokenAuthentication):
    """`Authorization: Token <key>` (the contract); `Bearer <key>` is accepted too."""

    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if header[:7].lower() == "bearer ":
            request.META["HTTP_AUTHORIZATION"] = "Token " + header[7:]
        return super().authenticate(request)
