from album import views, webhook
from django.urls import path

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz),
    path("events/new", views.event_new, name="event-new"),
    path("events/<int:event_id>", views.event_detail, name="event-detail"),
    path("events/<int:event_id>/qr.svg", views.event_qr, name="event-qr"),
    path("events/<int:event_id>/print", views.event_print, name="event-print"),
    path("events/<int:event_id>/decide", views.event_decide, name="event-decide"),
    path("gallery/<str:key>", views.gallery, name="gallery"),
    path("gallery/<str:key>/album.zip", views.gallery_album, name="gallery-album"),
    path("airlock/webhook", webhook.airlock_webhook, name="airlock-webhook"),
]
