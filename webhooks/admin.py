"""Webhooks in the admin: endpoints (per tenant, plus the global one's health), deliveries and their attempts.

Endpoints hold signing secrets and deliveries show every tenant's events, so all
of it is for platform staff only (attachments.staff_scope).
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html

from attachments.admin.modeladmins import ReadOnlyModelAdmin
from attachments.staff_scope import PlatformStaffOnly

from . import urlguard
from .models import EVENT_TYPES, DeliveryStatus, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from .services.delivery import delivery_replay
from .services.endpoints import endpoint_disable, endpoint_enable, endpoint_rotate_secret


class EndpointForm(forms.ModelForm):
    event_types = forms.MultipleChoiceField(
        choices=[(t, t) for t in EVENT_TYPES],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None checked: every event type.",
    )

    class Meta:
        model = WebhookEndpoint
        fields = ("tenant", "url", "description", "event_types", "enabled")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "tenant" in self.fields:
            self.fields["tenant"].required = True

    def clean_url(self) -> str:
        url = self.cleaned_data["url"].strip()
        try:
            urlguard.resolve(url, use_cache=False)  # the same rule deliveries apply (SSRF)
        except urlguard.UrlRefused as exc:
            raise forms.ValidationError(f"Refused: {exc}.") from None
        return url


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(PlatformStaffOnly, admin.ModelAdmin):
    form = EndpointForm
    list_display = (
        "__str__",
        "enabled",
        "events",
        "failing_since",
        "consecutive_failures",
        "disabled_reason",
        "last_success_at",
    )
    list_filter = ("enabled", "is_global")
    search_fields = ("url", "tenant__slug", "description")
    actions = ("rotate_secret", "enable", "disable", "replay_dead")
    readonly_fields = (
        "secret_shown",
        "rotation",
        "failing_since",
        "consecutive_failures",
        "disabled_at",
        "disabled_reason",
        "last_success_at",
        "created_at",
    )

    def get_fields(self, request, obj=None):
        if obj is not None and obj.is_global:
            return ("url_from_settings", "enabled", *self.readonly_fields[2:])
        return ("tenant", "url", "description", "event_types", "enabled", *self.readonly_fields)

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if change and "enabled" in form.changed_data and obj.enabled:
            endpoint_enable(endpoint_id=obj.pk)  # as the Enable action: the failures so far are forgiven

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and obj.is_global:
            return ("url_from_settings", *self.readonly_fields[2:])
        return self.readonly_fields

    @admin.display(description="events")
    def events(self, obj: WebhookEndpoint) -> str:
        return ", ".join(obj.event_types) if obj.event_types else "all"

    @admin.display(description="URL")
    def url_from_settings(self, obj: WebhookEndpoint) -> str:
        return format_html(
            "{} <br><small>from AIRLOCK_WEBHOOK_URL; the secret is AIRLOCK_WEBHOOK_SECRET "
            "(several, space-separated, while rotating)</small>",
            obj.url,
        )

    @admin.display(description="signing secret")
    def secret_shown(self, obj: WebhookEndpoint) -> str:
        if not obj.pk:
            return "made when the endpoint is saved"
        return format_html(
            "<code>{}</code><br><small>give it to the receiver; verify with any Standard Webhooks library</small>",
            obj.secret,
        )

    @admin.display(description="rotation")
    def rotation(self, obj: WebhookEndpoint) -> str:
        if obj.previous_secret and obj.previous_secret_expires_at:
            return format_html(
                "previous secret <code>{}</code> also signs until {} UTC",
                obj.previous_secret,
                obj.previous_secret_expires_at.strftime("%Y-%m-%d %H:%M:%S"),
            )
        return "—"

    @admin.action(description="Rotate the signing secret (the old one signs too during the overlap)")
    def rotate_secret(self, request, queryset):
        done = 0
        for endpoint in queryset.filter(is_global=False):
            endpoint_rotate_secret(endpoint_id=endpoint.pk)
            done += 1
        self.message_user(
            request, f"Rotated {done} secret(s); the global endpoint's is AIRLOCK_WEBHOOK_SECRET.", messages.SUCCESS
        )

    @admin.action(description="Enable")
    def enable(self, request, queryset):
        for endpoint in queryset:
            endpoint_enable(endpoint_id=endpoint.pk)
        self.message_user(request, f"Enabled {queryset.count()} endpoint(s).", messages.SUCCESS)

    @admin.action(description="Disable (what they are owed is dead-lettered, replayable)")
    def disable(self, request, queryset):
        actor = f"staff:{request.user.get_username()}"
        dropped = sum(endpoint_disable(endpoint_id=e.pk, reason=f"disabled by {actor}") for e in queryset)
        self.message_user(
            request, f"Disabled {queryset.count()} endpoint(s); {dropped} deliveries dead-lettered.", messages.SUCCESS
        )

    @admin.action(description="Replay their dead-lettered deliveries")
    def replay_dead(self, request, queryset):
        ids = list(
            WebhookDelivery.objects.filter(endpoint__in=queryset, status=DeliveryStatus.DEAD).values_list(
                "pk", flat=True
            )[:10_000]
        )
        replayed, refused = delivery_replay(delivery_ids=ids)
        self.message_user(
            request,
            f"Replaying {replayed} deliveries; {refused} refused (endpoint disabled).",
            messages.SUCCESS if not refused else messages.WARNING,
        )


class AttemptInline(admin.TabularInline):
    model = WebhookAttempt
    fields = ("started_at", "status_code", "ok", "latency_ms", "error", "response_snippet")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("-started_at", "-id")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(PlatformStaffOnly, ReadOnlyModelAdmin):
    list_display = (
        "event_type",
        "attachment",
        "endpoint",
        "status",
        "attempts",
        "last_status_code",
        "last_error",
        "created_at",
        "next_attempt_at",
        "delivered_at",
    )
    list_filter = ("status", "event__type", "endpoint")
    search_fields = ("event__id", "=event__attachment_id")
    list_select_related = ("event", "endpoint", "endpoint__tenant")
    fields = (
        "webhook_id",
        "event_type",
        "attachment",
        "endpoint",
        "status",
        "attempts",
        "created_at",
        "next_attempt_at",
        "delivered_at",
        "last_status_code",
        "last_error",
        "body",
    )
    readonly_fields = fields
    inlines = (AttemptInline,)
    actions = ("replay",)
    ordering = ("-created_at", "-id")

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("event", "endpoint", "endpoint__tenant")

    @admin.display(description="event", ordering="event__type")
    def event_type(self, obj: WebhookDelivery) -> str:
        return obj.event.type

    @admin.display(description="webhook-id")
    def webhook_id(self, obj: WebhookDelivery) -> str:
        return obj.event_id

    @admin.display(description="attachment")
    def attachment(self, obj: WebhookDelivery) -> str:
        return str(obj.event.attachment_id)

    @admin.display(description="body")
    def body(self, obj: WebhookDelivery) -> str:
        return format_html("<pre style='white-space: pre-wrap'>{}</pre>", obj.event.body)

    @admin.action(description="Replay (send again with the same webhook-id)")
    def replay(self, request, queryset):
        replayed, refused = delivery_replay(delivery_ids=list(queryset.values_list("pk", flat=True)))
        self.message_user(
            request,
            f"Replaying {replayed} deliveries; {refused} refused (endpoint disabled).",
            messages.SUCCESS if not refused else messages.WARNING,
        )
