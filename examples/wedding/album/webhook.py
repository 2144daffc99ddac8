"""Airlock's webhook endpoint: verify the Standard Webhooks signature, then record what it says of a guest's file."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from airlock_client import WebhookVerificationError, verify_webhook

from .services import webhook_apply


@csrf_exempt  # Airlock is no browser: the signature is the credential
@require_POST
def airlock_webhook(request: HttpRequest) -> HttpResponse:
    try:
        event = verify_webhook(request.headers, request.body, settings.AIRLOCK_WEBHOOK_SECRET)
    except WebhookVerificationError:
        return HttpResponse(status=400)
    webhook_apply(webhook_id=request.headers["webhook-id"], event=event)
    return HttpResponse(status=204)  # any 2xx: delivered; anything else is sent again
