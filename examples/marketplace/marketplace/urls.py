from ads import views, webhook
from django.urls import path

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz),
    path("ads/new", views.ad_new, name="ad-new"),
    path("ads/<int:ad_id>", views.ad_detail, name="ad-detail"),
    path("ads/<int:ad_id>/edit", views.draft_edit, name="draft-edit"),
    path("ads/<int:ad_id>/photos", views.draft_photos, name="draft-photos"),
    path("ads/<int:ad_id>/post", views.draft_post, name="draft-post"),
    path("ads/<int:ad_id>/cancel", views.draft_cancel, name="draft-cancel"),
    path("airlock/webhook", webhook.airlock_webhook, name="airlock-webhook"),
]
