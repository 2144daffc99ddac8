from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from attachments import pages
from attachments.admin import views as admin_views
from attachments.links import page as guest_page
from ops import views as ops

urlpatterns = [
    path("admin/dashboard/", admin.site.admin_view(admin_views.dashboard), name="admin-dashboard"),
    path("admin/", admin.site.urls),
    path("", pages.upload_page, name="upload-page"),
    path("upload", pages.client_upload_page, name="client-upload-page"),
    path("l/<uuid:link_id>", guest_page.guest_page, name="guest-page"),
    path("l/<uuid:link_id>/qr.svg", guest_page.guest_qr_svg, name="guest-qr-svg"),
    path("l/<uuid:link_id>/qr.png", guest_page.guest_qr_png, name="guest-qr-png"),
    path("api/v1/schema", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/v1/docs", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/v1/", include("attachments.api.urls")),
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("metrics", ops.metrics, name="metrics"),
]

handler400 = "attachments.api.errors.handler400"
handler404 = "attachments.api.errors.handler404"
handler500 = "attachments.api.errors.handler500"
