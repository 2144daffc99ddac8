"""Services reach storage through its interfaces (the gateway, the staging): none names a backend.

The services are the attachments app's services/ and its concerns' (tests/architecture/homes.py).

Two are S3 features by nature: bucket_setup.py configures the bucket, storage_events.py
acts on its event notifications (and ignores them when Airlock does not store on S3).
"""

from __future__ import annotations

import ast

import pytest

from tests.architecture.homes import ROOT, service_modules

EXEMPT = {"bucket_setup.py", "storage_events.py"}
BACKENDS = {"LocalGateway", "S3Gateway", "LocalStaging", "S3Staging"}
BACKEND_NAMES = {"local", "s3"}


def backend_branches(source: str) -> list[str]:
    """Each place that names a storage backend: its class, or a comparison with its name ("s3", "local")."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id in BACKENDS:
            found.append(f"{node.lineno}: {node.id}")
        elif isinstance(node, ast.alias) and node.name in BACKENDS:
            found.append(f"{node.lineno}: imports {node.name}")
        elif isinstance(node, ast.Compare) and any(
            isinstance(side, ast.Constant) and side.value in BACKEND_NAMES for side in [node.left, *node.comparators]
        ):
            found.append(f"{node.lineno}: compares with a backend's name")
    return found


def test_no_service_branches_on_the_storage_backend():
    services = service_modules("attachments")
    assert ROOT / "attachments" / "uploads" / "services" / "uploads.py" in services
    assert ROOT / "attachments" / "variants" / "services" / "obtain.py" in services
    problems = {
        str(path.relative_to(ROOT)): found
        for path in services
        if path.name not in EXEMPT and (found := backend_branches(path.read_text()))
    }
    assert problems == {}


@pytest.mark.parametrize(
    "source",
    [
        "from ..storage.staging import LocalStaging\n",
        "if isinstance(staging, S3Staging):\n    pass\n",
        'if gateway.name == "s3":\n    pass\n',
        'if settings.AIRLOCK_STORAGE != "local":\n    pass\n',
    ],
)
def test_the_guard_sees_a_planted_branch(source):
    assert backend_branches(source)
