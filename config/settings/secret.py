"""The embedded default's SECRET_KEY: random per install, made on first run, kept in the data directory.

Every process of one install (serve, a worker, `manage.py createuser`, tests that
start serve) reads the same file, so signatures made by one are valid in the
others. Creation is race-safe: the key is written to a private temporary file,
then hard-linked into place, which fails if another process got there first
(O_EXCL semantics without anyone ever reading a half-written key).
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from attachments.private_files import FILE_MODE, private_dir, private_file

FILE_NAME = "secret_key"
MIN_LENGTH = 50


def install_secret_key(data_dir: Path) -> str:
    private_dir(data_dir)
    path = Path(data_dir) / FILE_NAME
    if not path.exists():
        _create(path)
    private_file(path)  # an older install's key file may be 0644
    for _ in range(40):  # only the no-hard-link fallback can show a key file mid-write
        key = path.read_text(encoding="ascii").strip()
        if len(key) >= MIN_LENGTH:
            return key
        time.sleep(0.05)
    if len(key) < MIN_LENGTH:
        raise ImproperlyConfigured(
            f"{path} does not hold a usable secret key; delete it to make a new one "
            "(this signs out every session and voids outstanding upload URLs)."
        )
    return key


def _create(path: Path) -> None:
    tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_urlsafe(64) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process won the race: its key is the install's key
        except OSError:  # a filesystem without hard links: exclusive create of the key file itself
            _create_exclusive(path, tmp.read_text(encoding="ascii"))
    finally:
        tmp.unlink(missing_ok=True)


def _create_exclusive(path: Path, key: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(key)
