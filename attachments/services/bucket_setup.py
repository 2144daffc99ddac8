"""The bucket configuration Airlock needs on S3: browser CORS and the abort of stale multipart uploads.

`manage.py s3_setup` shows the drift (`--dry-run`) or fixes it (`--apply`).
Only Airlock's own rules (by ID) are touched: other CORS and lifecycle rules
already on the bucket are kept as they are.

On Cloudflare R2 the same two rules go through R2's S3 API; what R2 does not
configure through it (event notification rules, the queue they go to, that
queue's dead-letter queue and HTTP pull consumer) is listed as `wrangler`
commands for the operator to run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from ..storage import StorageError, get_gateway
from ..storage.s3 import S3Gateway

CORS_RULE_ID = "airlock-browser-uploads"
LIFECYCLE_RULE_ID = "airlock-abort-incomplete-multipart"
# What a browser does at the bucket: presigned POST/PUT (parts included), and
# presigned GET/HEAD (downloads); the multipart client reads each part's ETag.
CORS_METHODS = ["GET", "HEAD", "POST", "PUT"]
CORS_EXPOSE = ["ETag"]
CORS_MAX_AGE_SECONDS = 3600
DAY = 86400
# The queue R2 notifies: a message failing this many deliveries goes to the dead-letter queue.
R2_MESSAGE_RETRIES = 3
R2_VISIBILITY_TIMEOUT_SECONDS = 60  # consume_storage_events' default lease


def abort_after_days() -> int:
    """Days after which S3 drops a multipart upload's parts by itself.

    A multipart upload can rightly live as long as its intent: parts re-signed
    (`POST …/parts`) or a tus upload kept moving restart the upload URL's
    lifetime, up to the intent's hard cap. So: hard cap + one upload URL
    lifetime, in whole days, at least 1 (16 days by default). The sweeper
    aborts a dead upload sooner; this rule is the backstop for ones it never saw.
    """
    seconds = settings.AIRLOCK_LIFECYCLE_SECONDS.hard_cap + settings.AIRLOCK_URL_SECONDS.upload
    return max(1, math.ceil(seconds / DAY))


def wanted_cors_rule() -> dict[str, Any] | None:
    origins = list(settings.AIRLOCK_CORS_ALLOWED_ORIGINS)
    if not origins:
        return None
    return {
        "ID": CORS_RULE_ID,
        "AllowedOrigins": origins,
        "AllowedMethods": CORS_METHODS,
        "AllowedHeaders": ["*"],
        "ExposeHeaders": CORS_EXPOSE,
        "MaxAgeSeconds": CORS_MAX_AGE_SECONDS,
    }


def wanted_lifecycle_rule() -> dict[str, Any]:
    return {
        "ID": LIFECYCLE_RULE_ID,
        "Status": "Enabled",
        "Filter": {"Prefix": ""},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": abort_after_days()},
    }


def _cors_shape(rule: dict[str, Any]) -> tuple:
    return (
        sorted(rule.get("AllowedOrigins", [])),
        sorted(m.upper() for m in rule.get("AllowedMethods", [])),
        sorted(h.lower() for h in rule.get("AllowedHeaders", [])),
        sorted(h.lower() for h in rule.get("ExposeHeaders", [])),
        rule.get("MaxAgeSeconds"),
    )


def _lifecycle_shape(rule: dict[str, Any]) -> tuple:
    prefix = (rule.get("Filter") or {}).get("Prefix", rule.get("Prefix", ""))
    days = (rule.get("AbortIncompleteMultipartUpload") or {}).get("DaysAfterInitiation")
    return rule.get("Status"), prefix, days


def _describe_cors(rule: dict[str, Any]) -> str:
    return (
        f"origins {','.join(rule.get('AllowedOrigins', []))}; methods {','.join(rule.get('AllowedMethods', []))}; "
        f"expose {','.join(rule.get('ExposeHeaders', [])) or '-'}; max age {rule.get('MaxAgeSeconds')}"
    )


@dataclass
class BucketPlan:
    """The rule lists to write, and what differs from the bucket now (empty: nothing to do)."""

    bucket: str
    cors_rules: list[dict[str, Any]]
    lifecycle_rules: list[dict[str, Any]]
    cors_drift: list[str] = field(default_factory=list)
    lifecycle_drift: list[str] = field(default_factory=list)
    flavor: str = "s3"
    manual_steps: list[str] = field(default_factory=list)  # commands for what the S3 API cannot set

    @property
    def drift(self) -> list[str]:
        return self.cors_drift + self.lifecycle_drift


def _gateway() -> S3Gateway:
    gateway = get_gateway()
    if not isinstance(gateway, S3Gateway):
        raise StorageError("s3_setup configures an S3 bucket: set AIRLOCK_STORAGE=s3 and AIRLOCK_S3_BUCKET")
    return gateway


def r2_manual_steps(*, bucket: str, queue: str) -> list[str]:
    """The `wrangler` commands for what R2 does not configure through its S3 API."""
    dlq = f"{queue}-dlq"
    notify = f"npx wrangler r2 bucket notification create {bucket} --queue {queue} --prefix tenants/"
    return [
        f"npx wrangler queues create {queue}",
        f"npx wrangler queues create {dlq}",
        f"npx wrangler queues consumer http add {queue} --message-retries {R2_MESSAGE_RETRIES} "
        f"--dead-letter-queue {dlq} --visibility-timeout-secs {R2_VISIBILITY_TIMEOUT_SECONDS}",
        f"{notify} --event-type object-create",
        f"{notify} --event-type object-delete",
    ]


def bucket_setup_plan(gateway: S3Gateway | None = None, *, queue: str | None = None) -> BucketPlan:
    """Read the bucket's CORS and lifecycle rules and work out what Airlock's rules should be.

    On R2, also the `wrangler` commands for its notifications to `queue` (default <bucket>-events).
    """
    gateway = gateway or _gateway()
    plan = BucketPlan(bucket=gateway.bucket, cors_rules=[], lifecycle_rules=[], flavor=gateway.flavor)
    if gateway.flavor == "r2":
        plan.manual_steps = r2_manual_steps(bucket=gateway.bucket, queue=queue or f"{gateway.bucket}-events")

    current_cors = gateway.bucket_cors_rules()
    ours = [rule for rule in current_cors if rule.get("ID") == CORS_RULE_ID]
    plan.cors_rules = [rule for rule in current_cors if rule.get("ID") != CORS_RULE_ID]
    wanted = wanted_cors_rule()
    if wanted is not None:
        plan.cors_rules.append(wanted)
    if wanted is None and ours:
        plan.cors_drift.append(f"CORS rule {CORS_RULE_ID}: present, want none (AIRLOCK_CORS_ALLOWED_ORIGINS is empty)")
    elif wanted is not None and not ours:
        plan.cors_drift.append(f"CORS rule {CORS_RULE_ID}: missing, want {_describe_cors(wanted)}")
    elif wanted is not None and (len(ours) > 1 or _cors_shape(ours[0]) != _cors_shape(wanted)):
        plan.cors_drift.append(f"CORS rule {CORS_RULE_ID}: {_describe_cors(ours[0])}, want {_describe_cors(wanted)}")

    current_lifecycle = gateway.bucket_lifecycle_rules()
    mine = [rule for rule in current_lifecycle if rule.get("ID") == LIFECYCLE_RULE_ID]
    wanted_rule = wanted_lifecycle_rule()
    plan.lifecycle_rules = [rule for rule in current_lifecycle if rule.get("ID") != LIFECYCLE_RULE_ID] + [wanted_rule]
    days = abort_after_days()
    if not mine:
        plan.lifecycle_drift.append(
            f"lifecycle rule {LIFECYCLE_RULE_ID}: missing, want AbortIncompleteMultipartUpload after {days} days"
        )
    elif len(mine) > 1 or _lifecycle_shape(mine[0]) != _lifecycle_shape(wanted_rule):
        status, prefix, had = _lifecycle_shape(mine[0])
        plan.lifecycle_drift.append(
            f"lifecycle rule {LIFECYCLE_RULE_ID}: {status}, prefix {prefix!r}, after {had} "
            f"days; want Enabled, prefix '', after {days} days"
        )
    return plan


def bucket_setup_apply(gateway: S3Gateway | None = None, *, queue: str | None = None) -> BucketPlan:
    """Write Airlock's rules where they drifted (other rules kept); return the plan that was applied."""
    gateway = gateway or _gateway()
    plan = bucket_setup_plan(gateway, queue=queue)
    if plan.cors_drift:
        gateway.set_bucket_cors_rules(plan.cors_rules)
    if plan.lifecycle_drift:
        gateway.set_bucket_lifecycle_rules(plan.lifecycle_rules)
    return plan
