"""A video's `web` rendition, made after ready only where its copy would not play everywhere; one stored copy.

Every check reads what the API serves: the rendition's bytes are reopened with PyAV
and their boxes walked; nothing trusts the state the code writes about itself.
"""

from __future__ import annotations

import hashlib
import tempfile
from datetime import timedelta

import av
import pytest
from django.utils import timezone

from attachments import renditions
from attachments.models import Attachment, DeadLetter, TransitionLog
from attachments.services.audit import ORIGINAL_REMOVED
from attachments.services.quotas import tenant_usage
from attachments.services.renditions import rendition_claim, renditions_redrive
from attachments.storage import get_gateway
from processing import transcode
from processing.renditions import job_wall_seconds
from processing.sandbox import SandboxUnavailable
from processing.sandbox import runner as sandbox_runner
from tests.corpus import corpus_dir
from tests.corpus import make_media as media
from tests.pipeline.test_media_served import LOCATION_BYTES, boxes
from tests.support import run_pipeline, upload

pytestmark = pytest.mark.django_db

GENERATED = corpus_dir() / "generated"


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def _hevc_aac_rotated_with_location() -> bytes:
    """An iPhone's clip, small: HEVC + AAC held upright (90 degrees clockwise), its location in the moov."""

    def build(c):
        video = media._video(c, "libx265", **{"x265-params": "log-level=none:pools=none:frame-threads=1"})
        video.codec_context.codec_tag = "hvc1"
        video.set_display_rotation(-90)
        audio = media._audio(c, "aac")
        image = media.picture(media.H, media.W).transpose(media.Image.Transpose.ROTATE_90)
        media._write_video(c, video, 10, image=image)
        media._write_audio(c, audio, 1)

    apple = media._apple_meta(
        [("com.apple.quicktime.location.ISO6709", media.EIFFEL), ("com.apple.quicktime.make", "Apple")]
    )
    return media._moov_appended(media._made("mov", build), media._udta_location(media.EIFFEL) + apple)


def _wide_h264() -> bytes:
    """H.264 that plays but is wider than 1920 px: 2400 x 96, a few frames."""

    def build(c):
        media._write_video(c, media._video(c, "libx264", width=2400, height=96), 4)

    return media._made("mp4", build)


def _ready_video(client, data: bytes, name: str, content_type: str) -> Attachment:
    attachment_id = upload(client, data, profile="media", filename=name, content_type=content_type)
    assert run_pipeline(attachment_id) == "ready"
    return Attachment.objects.get(pk=attachment_id)


def _resource(client, attachment: Attachment) -> dict:
    response = client.get(f"/api/v1/attachments/{attachment.pk}")
    assert response.status_code == 200
    return response.json()


def _streams(data: bytes) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".mp4") as fh:
        fh.write(data)
        fh.flush()
        with av.open(fh.name) as container:
            video = container.streams.video[0]
            frame = next(container.decode(video=0))
            return {
                "format": container.format.name,
                "metadata": dict(container.metadata),
                "video": (video.codec_context.name, video.codec_context.profile, video.codec_context.pix_fmt),
                "audio": [(s.codec_context.name, s.codec_context.profile) for s in container.streams.audio],
                "size": (frame.width, frame.height),
                "rotation": frame.rotation,
                "duration": container.duration,
            }


def test_an_hevc_video_gets_an_h264_rendition_after_it_is_ready(alice, api):
    original = _hevc_aac_rotated_with_location()
    row = _ready_video(api(alice), original, "IMG_0001.MOV", "video/quicktime")
    shown = _resource(api(alice), row)
    # Ready first, poster and metadata with it: the rendition is made afterwards.
    assert shown["status"] == "ready" and "poster" in shown["links"]
    assert shown["renditions"] == {
        "web": {"status": "pending", "progress": 0.0, "codec": None, "width": None, "height": None, "bytes": None}
    }
    assert "web" not in shown["links"]

    assert transcode.transcode_one(row.pk) == "ready"

    shown = _resource(api(alice), row)
    web = shown["renditions"]["web"]
    assert web["status"] == "ready" and web["progress"] == 1.0 and web["codec"] == "h264"
    assert (web["width"], web["height"]) == (48, 64)  # turned upright: shown 48 x 64
    response = api().get(shown["links"]["web"])  # the signed link, no header
    assert response.status_code == 200 and response["Content-Type"] == "video/mp4"
    served = _body(response)
    assert len(served) == web["bytes"]
    facts = _streams(served)
    assert facts["video"] == ("h264", "High", "yuv420p")
    assert facts["audio"] == [("aac", "LC")]
    assert facts["size"] == (48, 64) and not facts["rotation"]  # rotation applied to the pixels
    assert set(facts["metadata"]) <= {"major_brand", "minor_version", "compatible_brands"}, facts["metadata"]
    assert 0.9e6 <= facts["duration"] <= 1.2e6
    top = [path[0] for path, _, _ in boxes(served) if len(path) == 1]
    assert top.index(b"moov") < top.index(b"mdat"), top
    for needle in LOCATION_BYTES:
        assert needle not in served, needle

    # Running it again changes nothing: nothing pending, nothing made twice.
    assert transcode.transcode_one(row.pk) == "skipped"
    assert row.derivatives.filter(kind="web").count() == 1


def test_a_video_wider_than_1920_gets_a_rendition_that_fits(alice, api):
    row = _ready_video(api(alice), _wide_h264(), "wide.mp4", "video/mp4")
    assert row.metadata["renditions"]["web"]["status"] == "pending"
    assert transcode.transcode_one(row.pk) == "ready"
    row.refresh_from_db()
    web = row.metadata["renditions"]["web"]
    assert (web["width"], web["height"]) == (1920, 76)
    derivative = row.derivatives.get(kind="web")
    data = b"".join(get_gateway().iter_chunks(derivative.storage_key))
    assert _streams(data)["size"] == (1920, 76)


def test_an_h264_video_that_plays_needs_no_rendition(alice, api):
    row = _ready_video(api(alice), (GENERATED / "video_h264_aac.mp4").read_bytes(), "clip.mp4", "video/mp4")
    shown = _resource(api(alice), row)
    assert shown["renditions"]["web"]["status"] == "not_needed", row.metadata
    assert "web" not in shown["links"]
    assert transcode.transcode_one(row.pk) == "skipped"
    assert not row.derivatives.filter(kind="web").exists()


def test_a_photo_has_no_renditions(alice, api, samples):
    attachment_id = upload(api(alice), samples.jpeg(), profile="image")
    assert run_pipeline(attachment_id) == "ready"
    assert "renditions" not in _resource(api(alice), Attachment.objects.get(pk=attachment_id))


def test_photos_and_transcodes_share_one_fork_server(alice, api, samples, monkeypatch):
    # A job that asks for other archive-member rules than the server has gets a new server,
    # and every job running on the old one dies with it (a photo's derive, or the transcode).
    row = _ready_video(api(alice), (GENERATED / "video_hevc.mp4").read_bytes(), "clip.mp4", "video/mp4")
    sandbox_runner.shutdown()
    started: list[object] = []

    class CountedServer(sandbox_runner._ForkServer):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)

    monkeypatch.setattr(sandbox_runner, "_ForkServer", CountedServer)
    photo = upload(api(alice), samples.jpeg(), profile="image")
    assert run_pipeline(photo) == "ready"
    assert transcode.transcode_one(row.pk) == "ready"
    another = upload(api(alice), samples.jpeg(), profile="image")
    assert run_pipeline(another) == "ready"
    assert len(started) == 1


def test_a_failed_transcode_leaves_the_file_ready_and_is_retried_then_dead_lettered(
    alice, api, monkeypatch, settings, django_capture_on_commit_callbacks
):
    settings.AIRLOCK_RETRIES = settings.AIRLOCK_RETRIES.replace(max_attempts=2)
    row = _ready_video(api(alice), (GENERATED / "video_hevc.mp4").read_bytes(), "clip.mp4", "video/mp4")

    def unavailable(*args, **kwargs):
        raise SandboxUnavailable("the fork server did not start")

    monkeypatch.setattr(transcode, "run_job", unavailable)
    with django_capture_on_commit_callbacks() as callbacks:
        assert transcode.transcode_one(row.pk) == "retried"
    row.refresh_from_db()
    assert row.status == "ready"
    state = row.metadata["renditions"]["web"]
    assert state["status"] == "pending" and state["attempts"] == 1 and "fork server" in state["error"]
    assert callbacks  # the retry went out through the outbox, with its backoff
    from attachments.models import OutboxMessage

    retry = OutboxMessage.objects.filter(actor_name="transcode").latest("pk")
    assert retry.args == [str(row.pk), str(row.tenant_id)] and retry.delay_ms > 0

    assert transcode.transcode_one(row.pk) == "failed"
    row.refresh_from_db()
    assert row.status == "ready"
    assert row.metadata["renditions"]["web"]["status"] == "failed"
    assert _resource(api(alice), row)["renditions"]["web"]["status"] == "failed"
    letter = DeadLetter.objects.get(attachment=row)
    assert letter.kind == DeadLetter.Kind.RENDITION and letter.payload["attempts"] == 2

    monkeypatch.undo()
    from attachments.services.renditions import rendition_requeue

    assert rendition_requeue(attachment_id=row.pk, actor="staff")
    letter.refresh_from_db()
    assert letter.resolved_by == "staff"  # the requeue answers the dead letter
    assert not rendition_requeue(attachment_id=row.pk, actor="staff")  # pending now: nothing to requeue
    assert transcode.transcode_one(row.pk) == "ready"


def test_a_transcode_killed_midway_starts_over(alice, api, monkeypatch):
    row = _ready_video(api(alice), (GENERATED / "video_hevc.mp4").read_bytes(), "clip.mp4", "video/mp4")
    real = transcode.run_job
    killed = []

    def killed_job(kind, source, work, **kwargs):
        # The job process dies by a signal mid-encode (what an OOM kill looks like).
        result = real(kind, source, work, **kwargs)
        killed.append(True)
        result.outcome, result.reason_code, result.killed_by, result.files = "rejected", "corrupt", "signal", {}
        return result

    monkeypatch.setattr(transcode, "run_job", killed_job)
    assert transcode.transcode_one(row.pk) == "retried"
    row.refresh_from_db()
    assert row.metadata["renditions"]["web"]["status"] == "pending"
    assert row.metadata["renditions"]["web"]["progress"] == 0.0
    monkeypatch.undo()
    assert transcode.transcode_one(row.pk) == "ready"
    assert killed == [True]


def test_a_worker_killed_midway_leaves_a_claim_that_runs_out_and_the_work_starts_over(
    alice, api, django_capture_on_commit_callbacks
):
    row = _ready_video(api(alice), (GENERATED / "video_hevc.mp4").read_bytes(), "clip.mp4", "video/mp4")
    # A job claimed it, then its worker died (no outcome was ever recorded).
    lost = rendition_claim(attachment_id=row.pk, wall_seconds_for=job_wall_seconds)
    assert lost is not None
    assert transcode.transcode_one(row.pk) == "skipped"  # the claim still runs: no second transcode
    assert renditions_redrive() == 0

    later = timezone.now() + timedelta(seconds=job_wall_seconds(2) + 120)
    with django_capture_on_commit_callbacks():
        assert renditions_redrive(now=later) == 1
    row.refresh_from_db()
    assert row.metadata["renditions"]["web"]["claim"] is None
    assert transcode.transcode_one(row.pk) == "ready"
    row.refresh_from_db()
    assert row.metadata["renditions"]["web"]["status"] == "ready"


def test_the_original_is_removed_once_the_copy_is_durable_and_usage_counts_the_copy(
    alice, api, django_capture_on_commit_callbacks
):
    original = _hevc_aac_rotated_with_location()
    row = _ready_video(api(alice), original, "IMG_0001.MOV", "video/quicktime")
    gateway = get_gateway()
    original_key = row.working_key
    assert gateway.head(original_key) is not None
    assert tenant_usage(tenant=row.tenant).bytes_used == len(original)

    with django_capture_on_commit_callbacks(execute=True):  # the objects go once the row says so
        transcode.transcode_one(row.pk)

    row.refresh_from_db()
    assert gateway.head(original_key) is None
    assert row.original_removed and row.working_key == row.served_key
    assert row.stored_size == row.size != len(original)
    assert tenant_usage(tenant=row.tenant).bytes_used == row.size
    audit = TransitionLog.objects.get(attachment=row, transition=ORIGINAL_REMOVED)
    assert audit.details["sha256"] == hashlib.sha256(original).hexdigest()
    assert audit.details["size"] == len(original)
    # What download serves is unchanged, and still has no location.
    served = _body(api(alice).get(f"/api/v1/attachments/{row.pk}/download"))
    assert hashlib.sha256(served).hexdigest() == row.sha256
    assert b"ISO6709" not in served


def test_a_video_without_its_original_is_processed_again_from_its_copy(alice, api, django_capture_on_commit_callbacks):
    from attachments.services.processing import attachments_reprocess
    from processing.rescan.jobs import rescan_one

    row = _ready_video(api(alice), _hevc_aac_rotated_with_location(), "IMG_0001.MOV", "video/quicktime")
    original_key = row.working_key
    with django_capture_on_commit_callbacks(execute=True):
        transcode.transcode_one(row.pk)
    row.refresh_from_db()
    assert row.original_removed and get_gateway().head(original_key) is None

    rescan_one(row.pk)
    row.refresh_from_db()
    assert row.status == "ready"

    assert attachments_reprocess(ids=[row.pk], status="ready", actor="staff", note="again") == 1
    assert run_pipeline(row.pk) == "ready", Attachment.objects.get(pk=row.pk).reason_message
    row.refresh_from_db()
    assert row.original_removed and row.stored_size == row.size
    assert get_gateway().head(row.working_key).size == row.size
    assert row.metadata["renditions"]["web"]["status"] == renditions.PENDING
    assert transcode.transcode_one(row.pk) == "ready"


def test_the_rendition_job_goes_out_when_a_video_becomes_ready(alice, api, django_capture_on_commit_callbacks):
    from attachments.models import OutboxMessage

    upload_id = upload(
        api(alice),
        (GENERATED / "video_hevc.mp4").read_bytes(),
        profile="media",
        filename="c.mp4",
        content_type="video/mp4",
    )
    assert run_pipeline(upload_id) == "ready"
    assert OutboxMessage.objects.filter(actor_name="transcode", args__0=str(upload_id)).count() == 1


def test_a_made_rendition_is_announced_by_webhook(alice, api, settings):
    import json

    from webhooks.models import WebhookEndpoint, WebhookEvent

    settings.AIRLOCK_WEBHOOK_ALLOW_PRIVATE = True
    row = _ready_video(api(alice), (GENERATED / "video_hevc.mp4").read_bytes(), "clip.mp4", "video/mp4")
    WebhookEndpoint.objects.create(
        tenant=row.tenant, url="https://hooks.example.test/airlock", event_types=["attachment.rendition_ready"]
    )
    assert not WebhookEvent.objects.filter(type="attachment.rendition_ready").exists()
    assert transcode.transcode_one(row.pk) == "ready"
    event = WebhookEvent.objects.get(type="attachment.rendition_ready", attachment_id=row.pk)
    data = json.loads(event.body)["data"]
    assert data["renditions"]["web"]["status"] == "ready" and "web" in data["links"]
