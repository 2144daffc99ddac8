"""One storage gateway: every storage call in Airlock goes through it."""

from __future__ import annotations

import threading

from django.conf import settings

from .base import ObjectInfo, StorageError, StorageGateway, validate_key

__all__ = ["ObjectInfo", "StorageError", "StorageGateway", "get_gateway", "reset_gateway", "validate_key"]

_lock = threading.Lock()
_gateway: StorageGateway | None = None


def get_gateway() -> StorageGateway:
    global _gateway
    with _lock:
        if _gateway is None:
            if settings.AIRLOCK_STORAGE == "s3":
                from .s3 import S3Gateway

                _gateway = S3Gateway.from_settings()
            elif settings.AIRLOCK_STORAGE == "local":
                from .local import LocalGateway

                _gateway = LocalGateway(settings.AIRLOCK_STORAGE_ROOT)
            else:
                raise StorageError(f"unknown AIRLOCK_STORAGE {settings.AIRLOCK_STORAGE!r}")
        return _gateway


def reset_gateway() -> None:
    """Forget the configured gateway (tests switch backends)."""
    global _gateway
    with _lock:
        _gateway = None
