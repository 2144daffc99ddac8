#!/usr/bin/env python
"""Peak memory over the hostile corpus: the worker process running the pipeline, and the sandbox jobs.

    python bench/memory.py [--corpus DIR]   (default: tests/corpus/files)

Every file of the corpus (MANIFEST.tsv: path, profile, expected outcome) goes
through the whole pipeline inline in this process (intake → scan → sandboxed
derive), on the embedded defaults in a scratch AIRLOCK_DATA_DIR. Worker peak =
this process's VmHWM (/proc/self/status). Sandbox peak = the largest
SandboxResult.peak_rss_kb of any job, cross-checked with
getrusage(RUSAGE_CHILDREN).ru_maxrss after the fork server has exited (which
covers every job it reaped). Both must stay under AIRLOCK_SANDBOX_MEMORY_BYTES
(the child's address-space limit). Also reports how many outcomes match the
manifest's expectation. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import csv
import resource
import sys
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import bench_django, emit, make_user, r  # noqa: E402

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus" / "files"


def vm_hwm_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--quick", action="store_true", help="accepted for symmetry; the corpus is small")
    args = parser.parse_args()
    bench_django()
    from django.conf import settings
    from django.utils import timezone

    import processing.sandbox as sandbox
    from attachments.models import Attachment
    from attachments.naming import original_key
    from attachments.profiles import get_profile
    from attachments.storage import get_gateway
    from attachments.uploads.services.uploads import object_arrived
    from processing import pipeline

    rows = list(csv.DictReader(open(args.corpus / "MANIFEST.tsv", newline=""), delimiter="\t"))
    user = make_user()
    tenant = user.membership.tenant
    jobs: list[tuple[int, str]] = []
    real_run_job = sandbox.run_job
    current = {"path": ""}

    def measured_run_job(*a, **k):
        result = real_run_job(*a, **k)
        jobs.append((result.peak_rss_kb or 0, current["path"]))
        return result

    sandbox.run_job = measured_run_job  # sandbox_config imports it from the package at call time
    hwm_before = vm_hwm_kb()
    outcomes: list[dict] = []
    for row in rows:
        path = args.corpus / row["path"]
        if not path.is_file():
            continue
        profile = get_profile(row["profile"])
        pk = uuid.uuid4()
        key = original_key(tenant_slug=tenant.slug, profile=profile.name, attachment_id=pk)
        now = timezone.now()
        Attachment.objects.create(
            id=pk,
            tenant=tenant,
            owner=user,
            profile=profile.name,
            filename=path.name[:200],
            declared_size=path.stat().st_size,
            declared_type=profile.allowed_types[0],
            storage_key=key,
            created_at=now,
            expires_at=now + timedelta(days=7),
        )
        data = path.read_bytes()
        get_gateway().write_chunks(key, [data])
        object_arrived(key=key, size=len(data), source="local", dedupe_key=f"bench:{key}", event_name="bench")
        current["path"] = row["path"]
        pipeline.start_and_intake(pk)
        for _ in range(4):
            att = Attachment.objects.get(pk=pk)
            if att.status != "processing":
                break
            pipeline.run_stage(pk, att.lease_token, att.step)
        att = Attachment.objects.get(pk=pk)
        got = att.status if att.status != "rejected" else f"rejected:{att.reason_code}"
        expected = row["expected"]
        ok = got == expected or (
            expected.startswith("rejected:")
            and got.startswith("rejected:")
            and got.split(":", 1)[1] in expected.split(":", 1)[1].split(",")
        )
        outcomes.append({"path": row["path"], "expected": expected, "got": got, "match": ok})
    worker_peak_kb = vm_hwm_kb()
    sandbox.shutdown()  # the fork server exits; its rusage (max over every job it reaped) becomes ours
    children_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    job_peak_kb, job_peak_path = max(jobs) if jobs else (0, "")
    limit = settings.AIRLOCK_SANDBOX_LIMITS.memory_bytes
    sandbox_peak_kb = max(job_peak_kb, children_kb)
    emit(
        {
            "worker_peak_rss_mb": r(worker_peak_kb / 1024, 1),
            "worker_rss_before_corpus_mb": r(hwm_before / 1024, 1),
            "sandbox_peak_rss_mb": r(sandbox_peak_kb / 1024, 1),
            "sandbox_peak_job_rss_mb": r(job_peak_kb / 1024, 1),
            "sandbox_peak_file": job_peak_path,
            "sandbox_children_maxrss_mb": r(children_kb / 1024, 1),
            "sandbox_memory_limit_mb": r(limit / 1048576, 1),
            "memory_under_limits": sandbox_peak_kb * 1024 < limit and worker_peak_kb * 1024 < limit,
            "corpus_files": len(outcomes),
            "corpus_outcomes_matching_manifest": sum(o["match"] for o in outcomes),
            "corpus_mismatches": [o for o in outcomes if not o["match"]][:20],
            "sandbox_jobs": len(jobs),
        }
    )


if __name__ == "__main__":
    main()
