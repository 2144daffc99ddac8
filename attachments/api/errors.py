"""Every error, from DRF or from our services, rendered in the contract's shape."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf
from rest_framework.response import Response

from ..errors import AirlockError
from .http import error_body
from .outages import outage_response

log = logging.getLogger("airlock.api")


def _flatten(detail) -> dict:
    if isinstance(detail, dict):
        return {str(k): [str(m) for m in (v if isinstance(v, list) else [v])] for k, v in detail.items()}
    if isinstance(detail, list):
        return {"non_field_errors": [str(m) for m in detail]}
    return {"non_field_errors": [str(detail)]}


def exception_handler(exc, context):
    if isinstance(exc, AirlockError):
        response = Response(error_body(exc.code, exc.message, exc.details), status=exc.status)
        for name, value in exc.headers.items():
            response[name] = value
        return response
    if isinstance(exc, Http404 | drf.NotFound):
        return Response(error_body("NOT_FOUND", "Not found."), status=404)
    if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
        from .auth import WRONG_SCHEME_MESSAGE, wrong_scheme

        message = WRONG_SCHEME_MESSAGE if wrong_scheme(context.get("request")) else str(exc.detail)
        response = Response(error_body("NOT_AUTHENTICATED", message), status=401)
        response["WWW-Authenticate"] = 'Token realm="api"'
        return response
    if isinstance(exc, drf.ValidationError):
        return Response(error_body("VALIDATION_ERROR", "The request is not valid.", _flatten(exc.detail)), status=400)
    if isinstance(exc, drf.ParseError | drf.UnsupportedMediaType):
        return Response(error_body("VALIDATION_ERROR", str(exc.detail)), status=400)
    if isinstance(exc, drf.Throttled):
        response = Response(error_body("RATE_LIMITED", str(exc.detail)), status=429)
        response["Retry-After"] = str(int(exc.wait or 1))
        return response
    if isinstance(exc, drf.MethodNotAllowed):
        return Response(error_body("METHOD_NOT_ALLOWED", str(exc.detail)), status=405)
    if isinstance(exc, drf.NotAcceptable):
        return Response(error_body("NOT_ACCEPTABLE", str(exc.detail)), status=406)
    if isinstance(exc, drf.PermissionDenied | PermissionDenied):
        # Other people's things are "not found": existence is never leaked.
        return Response(error_body("NOT_FOUND", "Not found."), status=404)
    if isinstance(exc, drf.APIException):
        return Response(error_body("ERROR", str(exc.detail)), status=exc.status_code)
    from django.core.exceptions import RequestDataTooBig, SuspiciousOperation

    if isinstance(exc, RequestDataTooBig):
        # A JSON body over DATA_UPLOAD_MAX_MEMORY_SIZE: Django refuses before reading it.
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            error_body(
                "TOO_LARGE", f"The request body is larger than the {limit} bytes allowed.", {"max_bytes": limit}
            ),
            status=413,
        )
    if isinstance(exc, SuspiciousOperation):  # too many fields or files, malformed multipart
        return Response(error_body("VALIDATION_ERROR", "The request could not be read."), status=400)
    outage = outage_response(exc)
    if outage is not None:
        return outage
    log.exception("unhandled API error")
    return Response(error_body("INTERNAL", "Internal error."), status=500)


def json_error(exc: AirlockError) -> JsonResponse:
    response = JsonResponse(error_body(exc.code, exc.message, exc.details), status=exc.status)
    for name, value in exc.headers.items():
        response[name] = value
    return response


def handler404(request, exception=None):
    return JsonResponse(error_body("NOT_FOUND", "Not found."), status=404)


def handler500(request):
    import sys

    # Django calls this inside its `except` block: the exception is still at hand.
    return outage_response(sys.exc_info()[1]) or JsonResponse(error_body("INTERNAL", "Internal error."), status=500)


def handler400(request, exception=None):
    return JsonResponse(error_body("VALIDATION_ERROR", "Bad request."), status=400)
