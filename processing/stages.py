"""The pipeline's stages, in order: the one table the queues, the actor names and the order derive from.

intake (with the scan) → derive → ready. A stage's name is also the name of its Dramatiq
queue and of the actor that runs its jobs (processing/actors.py), and the value
of a leased row's `step` column while the file is in it. A stage runs the steps
of processing/steps/ whose `stage` it is; what it reads from storage for them is
processing/pipeline.py's.

The jobs themselves (actor and queue) are attachments/jobs.py's: attachments sends
them without importing processing (dependencies point one way), and each stage
here is one of them with its place in the order.
"""

from __future__ import annotations

from dataclasses import dataclass

from attachments import jobs
from attachments.jobs import Job


@dataclass(frozen=True)
class Stage:
    job: Job
    next: str | None  # the stage a file goes to after this one; None: it is ready

    @property
    def name(self) -> str:
        return self.job.actor_name

    @property
    def queue(self) -> str:
        return self.job.queue

    @property
    def actor_name(self) -> str:
        return self.job.actor_name


# Intake runs the scan too: both read the bytes and check them, and both fail as infrastructure,
# so one retry unit, one transaction and one queue hop serve them. The scan stage stays for
# rows and jobs already at it (sent before the two were one); nothing sends a file to it now.
INTAKE = Stage(jobs.INTAKE, next="derive")
SCAN = Stage(jobs.SCAN, next="derive")
DERIVE = Stage(jobs.DERIVE, next=None)

STAGES: dict[str, Stage] = {stage.name: stage for stage in (INTAKE, SCAN, DERIVE)}

# Rescans of ready files are no stage: their own queue, behind every upload's (actors.py).
RESCAN_QUEUE = jobs.RESCAN.queue
QUEUES: tuple[str, ...] = (*(stage.queue for stage in STAGES.values()), RESCAN_QUEUE)
# A ready video's web rendition (processing/transcode.py) is no stage either: its queue and its
# actor share this name, and worker threads of their own consume it (ops/runtime.py).
TRANSCODE_QUEUE = jobs.TRANSCODE.queue
