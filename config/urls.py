from django.contrib import admin
from django.urls import include, path

from attachments import ops

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("attachments.api.urls")),
    path("healthz", ops.healthz, name="healthz"),
]

handler400 = "attachments.api.errors.handler400"
handler404 = "attachments.api.errors.handler404"
handler500 = "attachments.api.errors.handler500"
