"""Operator endpoints: liveness, readiness and Prometheus metrics (no login by default).

- ``GET /healthz``: the process answers (no dependency is touched).
- ``GET /readyz``: database, broker, storage and scanners, each bounded by a
  short timeout (ops/health.py); 200 when all are up, else 503. Computed at
  most once a second per process; tenant names only with the metrics token.
- ``GET /metrics``: Prometheus text (ops/metrics.py). When
  AIRLOCK_METRICS_TOKEN is set it needs ``Authorization: Bearer <token>``;
  without a token it is open only while AIRLOCK_METRICS.open is on (the
  embedded default; production settings turn it off), else 404.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from attachments.api.http import error_body


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    from .health import current_readiness

    report = current_readiness()
    # Anyone may probe; which tenants are paused is for whoever may read /metrics by its token.
    expected = settings.AIRLOCK_METRICS_TOKEN
    named = _metrics_authorized(request, expected) if expected else False
    return JsonResponse(report.as_dict(named=named), status=200 if report.ok else 503)


def _metrics_authorized(request: HttpRequest, expected: str) -> bool:
    header = request.headers.get("Authorization", "")
    scheme, _, presented = header.partition(" ")
    if scheme.lower() != "bearer" or not presented:
        return False
    return hmac.compare_digest(presented.strip().encode(), expected.encode())


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    expected = settings.AIRLOCK_METRICS_TOKEN
    if not expected and not settings.AIRLOCK_METRICS.open:
        # Closed: the series name every profile's traffic and the pipeline's health.
        return JsonResponse(
            error_body("NOT_FOUND", "Not found: /metrics needs AIRLOCK_METRICS_TOKEN (or AIRLOCK_METRICS=open=1)."),
            status=404,
        )
    if expected and not _metrics_authorized(request, expected):
        response = JsonResponse(
            error_body("NOT_AUTHENTICATED", "A valid bearer token is required for /metrics."),
            status=401,
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    from .metrics import render_latest

    body, content_type = render_latest()
    return HttpResponse(body, content_type=content_type)
