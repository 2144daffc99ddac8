from django.urls import path

from ..client_tokens import api as client_tokens
from ..links import api as links
from ..retention import api as retention
from ..uploads import api as uploads
from ..variants import api as variants
from . import (
    archive,
    lifecycle,
    storage_events,
    usage,
    views,
)

urlpatterns = [
    path("profiles", views.ProfilesApi.as_view(), name="profiles"),
    path("search", views.SearchApi.as_view(), name="search"),
    path("uploads", uploads.UploadIntentApi.as_view(), name="upload-intent"),
    path("uploads/<uuid:attachment_id>/content", uploads.UploadContentView.as_view(), name="upload-content"),
    path("uploads/<str:attachment_id>/complete", uploads.UploadCompleteApi.as_view(), name="upload-complete"),
    path("uploads/<str:attachment_id>/parts", uploads.UploadPartsApi.as_view(), name="upload-parts"),
    path("tus/", uploads.TusCreateApi.as_view(), name="tus-create"),
    path("tus/<str:attachment_id>", uploads.TusUploadApi.as_view(), name="tus-upload"),
    path("usage", usage.UsageApi.as_view(), name="usage"),
    path("client-tokens", client_tokens.ClientTokenCreateApi.as_view(), name="client-tokens"),
    path("client-tokens/<uuid:token_id>", client_tokens.ClientTokenApi.as_view(), name="client-token"),
    path("subjects/logout", client_tokens.SubjectLogoutApi.as_view(), name="subjects-logout"),
    path("subjects/erase", retention.SubjectEraseApi.as_view(), name="subjects-erase"),
    path("storage-events", storage_events.StorageEventsApi.as_view(), name="storage-events"),
    path("attachments", views.AttachmentListApi.as_view(), name="attachments"),
    path("attachments/heartbeat", lifecycle.HeartbeatApi.as_view(), name="attachments-heartbeat"),
    path("attachments/discard-all", lifecycle.DiscardAllApi.as_view(), name="attachments-discard-all"),
    path("attachments/commit", lifecycle.CommitApi.as_view(), name="attachments-commit"),
    path("attachments/release", lifecycle.ReleaseApi.as_view(), name="attachments-release"),
    path("attachments/approve", links.ApproveApi.as_view(), name="attachments-approve"),
    path("attachments/decline", links.DeclineApi.as_view(), name="attachments-decline"),
    path("upload-links", links.UploadLinksApi.as_view(), name="upload-links"),
    path("upload-links/<uuid:link_id>", links.UploadLinkApi.as_view(), name="upload-link"),
    path("guest-uploads/<str:attachment_id>", links.GuestUploadApi.as_view(), name="guest-upload"),
    path("attachments/<str:attachment_id>", lifecycle.AttachmentApi.as_view(), name="attachment"),
    path("attachments/<str:attachment_id>/download", views.AttachmentDownloadApi.as_view(), name="attachment-download"),
    path(
        "attachments/<str:attachment_id>/thumbnail", views.AttachmentThumbnailApi.as_view(), name="attachment-thumbnail"
    ),
    path("attachments/<str:attachment_id>/display", views.AttachmentDisplayApi.as_view(), name="attachment-display"),
    path("attachments/<str:attachment_id>/poster", views.AttachmentPosterApi.as_view(), name="attachment-poster"),
    path("attachments/<str:attachment_id>/web", views.AttachmentWebApi.as_view(), name="attachment-web"),
    path(
        "attachments/<str:attachment_id>/variants/<slug:name>",
        variants.AttachmentVariantApi.as_view(),
        name="attachment-variant",
    ),
    path("attachments/<str:attachment_id>/discard", lifecycle.DiscardApi.as_view(), name="attachment-discard"),
    # A ref may hold any character, "/" too (sent as %2F): everything up to the last segment.
    path("refs/<path:ref>/archive", archive.RefArchiveApi.as_view(), name="ref-archive"),
    path("refs/<path:ref>/archive-link", archive.RefArchiveLinkApi.as_view(), name="ref-archive-link"),
    path("attachments/<str:attachment_id>/restore", lifecycle.RestoreApi.as_view(), name="attachment-restore"),
]
