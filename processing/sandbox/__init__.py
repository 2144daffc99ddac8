"""The one place that hands attacker-supplied bytes to C decoders.

    result = run_job("image", path, work_dir, limits=Limits(), bounds=Bounds())

Every call runs in a job process forked from a long-lived fork server (started lazily
on first use, replaced if it dies): kernel limits (RLIMIT_AS/CPU/FSIZE/NOFILE/CORE),
a scrubbed environment and the confinement of confine.py (own uid, no capabilities,
seccomp, Landlock, RLIMIT_NPROC) are in place before the input is read, and the
server kills the job, and anything it left behind, at its wall-clock deadline. What the job does - crash, run out
of memory
or time, print garbage - comes back as a content outcome (rejected/corrupt or
rejected/timeout); only a sandbox that cannot start raises SandboxUnavailable.

Pure Python, no Django: the caller passes limits, bounds and paths in. work_dir should
be a fresh directory per job; derivatives are written there (thumbnail.webp,
sanitized.<ext>, text.txt) and named in SandboxResult.files.
"""

from .limits import Bounds, Limits
from .outcome import SandboxResult
from .runner import SandboxUnavailable, run_job, shutdown

__all__ = ["Bounds", "Limits", "SandboxResult", "SandboxUnavailable", "run_job", "shutdown"]
