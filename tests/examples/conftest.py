from tests.s3.conftest import moto_endpoint  # noqa: F401  (the S3 stand-in, over HTTP)
