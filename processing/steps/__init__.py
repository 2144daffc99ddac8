"""The pipeline's steps, each a small contract (Paperless-ngx's consumer plugins are the model).

A step declares what it applies to (`applies_to(profile, content_type)`) and runs on
what it is given (a StepInput: the size and first bytes, the bytes as a stream, or a
local file and a work dir). It returns facts (StepResult) or raises ContentRejected /
TransientError; it never writes the database and never moves a storage object: the
pipeline (processing/pipeline.py) reads storage for it, stores the files it produced
and has the services record the facts.

Every step is in one table, `registry.STEPS`; its decoders (`registry.DECODERS`) send
their files to the sandbox's job kinds of the same names, a table the sandbox owns
(processing/sandbox/kinds.py).
"""

from .base import Derivative, SandboxStep, Step, StepInput, StepResult

__all__ = ["Derivative", "SandboxStep", "Step", "StepInput", "StepResult"]
