"""Settings of the worker subprocess that fault tests start and kill (tests/faults/worker.py).

The same test settings, pointed at the *parent* test process's database and
broker namespace (both are per-process names in config.settings.test), which
the parent passes in the environment.
"""

import os

from config.settings.test import *  # noqa: F401,F403
from config.settings.test import CACHES, DATABASES, DRAMATIQ_BROKER, REDIS_URL

_DB = os.environ["AIRLOCK_FAULT_DB_NAME"]
DATABASES["default"]["NAME"] = _DB
DATABASES["default"]["TEST"] = {"NAME": _DB}

_NAMESPACE = os.environ.get("AIRLOCK_FAULT_NAMESPACE")
if REDIS_URL and _NAMESPACE:
    DRAMATIQ_BROKER["OPTIONS"] = {**DRAMATIQ_BROKER["OPTIONS"], "namespace": _NAMESPACE}
    CACHES["default"]["KEY_PREFIX"] = _NAMESPACE

# The parent's prefix, so per-tenant derive slots (and anything else keyed by it)
# are shared with the parent and private to this test run.
AIRLOCK_KEY_PREFIX = os.environ.get("AIRLOCK_FAULT_KEY_PREFIX", AIRLOCK_KEY_PREFIX)  # noqa: F405
