"""Operator endpoints: liveness (readiness and metrics live alongside)."""

from django.http import JsonResponse


def healthz(request):
    return JsonResponse({"status": "ok"})
