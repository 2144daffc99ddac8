"""The background jobs Airlock's services send: each by the actor that runs it and the queue it waits on.

Services send a job as an object (`outbox.enqueue(jobs.INTAKE, …)`), never by a
name typed at the call: a misspelt job fails at import, and the outbox takes the
queue from the job instead of asking the broker. The apps that run the jobs declare
their actors with these (processing/actors.py: `@dramatiq.actor(actor_name=jobs.INTAKE.actor_name,
queue_name=jobs.INTAKE.queue)`), so dependencies still point one way: attachments
names its jobs; processing and webhooks, which import attachments, run them.

A pipeline stage's job, its queue and the row's `step` while the file is in that
stage share one name (processing/stages.py), so a stage name read from a row
finds its job with `of_step`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Job:
    actor_name: str  # what the outbox row and the broker's message carry
    queue: str


INTAKE = Job("intake", queue="intake")  # spool, sniff, intake steps and the scan
SCAN = Job("scan", queue="scan")  # jobs already at the scan stage (sent before intake ran it)
DERIVE = Job("derive", queue="derive")  # decode in the sandbox, write the derivatives
REDERIVE = Job("rederive", queue="derive")  # a ready file's missing derivatives, made again
RESCAN = Job("rescan", queue="rescan")  # a ready file scanned again with newer signatures
TRANSCODE = Job("transcode", queue="transcode")  # a ready video's web rendition
WEBHOOK_DELIVER = Job("webhook_deliver", queue="webhooks")  # one delivery to one endpoint

JOBS: dict[str, Job] = {
    job.actor_name: job for job in (INTAKE, SCAN, DERIVE, REDERIVE, RESCAN, TRANSCODE, WEBHOOK_DELIVER)
}
STAGE_JOBS: dict[str, Job] = {job.actor_name: job for job in (INTAKE, SCAN, DERIVE)}


def of_step(step: str) -> Job:
    """The job that runs a pipeline stage, from the stage's name (a row's `step`)."""
    try:
        return STAGE_JOBS[step]
    except KeyError:
        raise ValueError(f"no pipeline stage named {step!r}") from None
