"""manage.py s3_setup against a real S3 API (moto server): drift shown, fixed, other rules kept."""

from __future__ import annotations

from io import StringIO

import pytest
from botocore.exceptions import ClientError
from django.core.management import CommandError, call_command

pytestmark = [pytest.mark.s3]

APP = "https://app.example.com"
THEIRS_LIFECYCLE = {"ID": "logs-expire", "Status": "Enabled", "Filter": {"Prefix": "logs/"}, "Expiration": {"Days": 30}}
THEIRS_CORS = {"ID": "their-site", "AllowedOrigins": ["https://other.example.com"], "AllowedMethods": ["GET"]}


def _run(*args: str) -> str:
    out = StringIO()
    call_command("s3_setup", *args, stdout=out)
    return out.getvalue()


def _cors(s3) -> list[dict]:
    try:
        return s3.client.get_bucket_cors(Bucket=s3.bucket)["CORSRules"]
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "NoSuchCORSConfiguration"
        return []


def _lifecycle(s3) -> list[dict]:
    try:
        return s3.client.get_bucket_lifecycle_configuration(Bucket=s3.bucket)["Rules"]
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "NoSuchLifecycleConfiguration"
        return []


@pytest.fixture
def origins(settings):
    settings.AIRLOCK_CORS_ALLOWED_ORIGINS = [APP, "http://localhost:3000"]
    return settings.AIRLOCK_CORS_ALLOWED_ORIGINS


def test_dry_run_reports_drift_and_changes_nothing(s3, origins):
    s3.client.put_bucket_lifecycle_configuration(Bucket=s3.bucket, LifecycleConfiguration={"Rules": [THEIRS_LIFECYCLE]})
    out = _run("--dry-run")
    assert "drift: CORS rule airlock-browser-uploads: missing" in out
    assert f"origins {APP},http://localhost:3000" in out
    assert "drift: lifecycle rule airlock-abort-incomplete-multipart: missing" in out
    assert "run with --apply" in out
    assert _cors(s3) == []
    assert [rule["ID"] for rule in _lifecycle(s3)] == ["logs-expire"]


def test_apply_sets_cors_and_the_lifecycle_rule_keeping_other_rules_then_no_drift(s3, origins, settings):
    s3.client.put_bucket_lifecycle_configuration(Bucket=s3.bucket, LifecycleConfiguration={"Rules": [THEIRS_LIFECYCLE]})
    s3.client.put_bucket_cors(Bucket=s3.bucket, CORSConfiguration={"CORSRules": [THEIRS_CORS]})
    out = _run("--apply")
    assert "fixed: CORS rule" in out and "fixed: lifecycle rule" in out

    cors = {rule.get("ID"): rule for rule in _cors(s3)}
    assert cors["their-site"]["AllowedOrigins"] == ["https://other.example.com"]
    ours = cors["airlock-browser-uploads"]
    assert ours["AllowedOrigins"] == [APP, "http://localhost:3000"]
    assert sorted(ours["AllowedMethods"]) == ["GET", "HEAD", "POST", "PUT"]
    assert ours["ExposeHeaders"] == ["ETag"] and ours["AllowedHeaders"] == ["*"]

    rules = {rule["ID"]: rule for rule in _lifecycle(s3)}
    assert rules["logs-expire"]["Expiration"] == {"Days": 30}
    assert rules["logs-expire"]["Filter"] == {"Prefix": "logs/"}
    mine = rules["airlock-abort-incomplete-multipart"]
    # The default hard cap (15 days) plus one upload URL lifetime (15 minutes), rounded up.
    assert mine["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 16}
    assert mine["Status"] == "Enabled"

    assert _run("--apply").strip() == f"bucket {s3.bucket}: no drift"
    assert _run("--dry-run").strip() == f"bucket {s3.bucket}: no drift"


def test_a_changed_setting_is_drift_and_apply_updates_only_our_rule(s3, origins, settings):
    _run("--apply")
    settings.AIRLOCK_LIFECYCLE_SECONDS = settings.AIRLOCK_LIFECYCLE_SECONDS.replace(hard_cap=3 * 86400)
    settings.AIRLOCK_CORS_ALLOWED_ORIGINS = [APP]
    out = _run("--dry-run")
    assert "after 16 days; want Enabled, prefix '', after 4 days" in out
    assert "want origins https://app.example.com;" in out
    _run("--apply")
    (rule,) = _lifecycle(s3)
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 4}
    (cors,) = _cors(s3)
    assert cors["AllowedOrigins"] == [APP]


def test_days_are_at_least_one(s3, settings):
    settings.AIRLOCK_LIFECYCLE_SECONDS = settings.AIRLOCK_LIFECYCLE_SECONDS.replace(hard_cap=0)
    settings.AIRLOCK_URL_SECONDS = settings.AIRLOCK_URL_SECONDS.replace(upload=60)
    _run("--apply")
    (rule,) = _lifecycle(s3)
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}


def test_no_origins_means_no_cors_rule_of_ours(s3, settings):
    settings.AIRLOCK_CORS_ALLOWED_ORIGINS = [APP]
    _run("--apply")
    settings.AIRLOCK_CORS_ALLOWED_ORIGINS = []
    assert "CORS rule airlock-browser-uploads: present, want none" in _run("--dry-run")
    _run("--apply")
    assert _cors(s3) == []
    assert _run("--dry-run").strip() == f"bucket {s3.bucket}: no drift"


def test_on_local_storage_it_says_what_to_set(settings):
    from attachments.storage import reset_gateway

    settings.AIRLOCK_STORAGE = "local"
    reset_gateway()
    with pytest.raises(CommandError, match="AIRLOCK_STORAGE=s3"):
        _run("--dry-run")


def test_mode_is_required():
    with pytest.raises(CommandError, match="one of the arguments --dry-run --apply is required"):
        _run()
