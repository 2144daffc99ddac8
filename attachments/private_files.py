"""Files and directories only Airlock's own user may read: 0700 directories, 0600 files.

The embedded default keeps the database, the stored uploads, quarantined
files and the secret key on the local disk; on a shared machine a 0644 file is
anyone's to read. Modes are set explicitly rather than through the process
umask, which Airlock does not own (gunicorn, test runners, a host's shell).
Pure standard library: the settings modules use it before Django is set up.
"""

from __future__ import annotations

import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Create `path` and every missing parent as 0700 (mkdir -p leaves parents at 0755).

    Directories that already exist are left alone: a data directory may be a
    shared mount point or a parent the operator owns.
    """
    path = Path(path)
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue  # another process made it meanwhile
        os.chmod(directory, DIR_MODE)  # mkdir's mode passes through the umask
    return path


def private_file(path: Path) -> Path:
    """Make sure `path` exists and is 0600 (created empty if missing, tightened if ours and looser)."""
    path = Path(path)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    except FileExistsError:
        st = path.stat()
        if st.st_uid == os.getuid() and st.st_mode & 0o077:
            os.chmod(path, FILE_MODE)
    return path
