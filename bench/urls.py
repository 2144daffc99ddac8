"""The real URLs plus the bare baseline views, served by the same gunicorn in the same run."""

from django.urls import path

from config.urls import handler400, handler404, handler500  # noqa: F401
from config.urls import urlpatterns as real_urlpatterns

from . import bare_views

urlpatterns = [
    path("bench/bare/insert", bare_views.BareInsertApi.as_view()),
    path("bench/bare/select/<uuid:pk>", bare_views.BareSelectApi.as_view()),
    path("bench/bare/file/<uuid:pk>", bare_views.BareFileApi.as_view()),
    *real_urlpatterns,
]
