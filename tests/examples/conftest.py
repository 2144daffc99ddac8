# The examples' browser tests share these; each test module gives its `example`.
from tests.examples.host_apps import chromium, s3_stack, stack  # noqa: F401
from tests.s3.conftest import moto_endpoint  # noqa: F401  (the S3 stand-in, over HTTP)
