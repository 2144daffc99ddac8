"""Helpers shared by the sandbox tests (no Django: these tests never touch the database)."""

from __future__ import annotations

import io
import random
import struct
import zlib

from PIL import Image

from processing.sandbox import SandboxResult
from tests.corpus import corpus_dir  # noqa: F401  (re-exported for the sandbox tests)


def outcome(result: SandboxResult) -> str:
    """The manifest's spelling: ready | rejected:<code>."""
    return "ready" if result.outcome == "ok" else f"rejected:{result.reason_code}"


def noisy_png(width: int = 640, height: int = 360) -> bytes:
    """A PNG whose pixels make a real deflate stream (not one long run), split into IDATs."""
    rng = random.Random(5)
    pixels = bytes(rng.getrandbits(8) & 0xF0 for _ in range(width * height * 3))
    buf = io.BytesIO()
    Image.frombytes("RGB", (width, height), pixels).save(buf, "PNG")
    return buf.getvalue()


def with_invalid_deflate(png: bytes) -> bytes:
    """The first IDAT's deflate stream turned into a reserved block type (3), under a valid
    chunk CRC: only inflate can tell. (Bits flipped at random may decode to wrong pixels
    unnoticed: Pillow stops reading before the Adler-32 at the stream's end.)"""
    at = png.index(b"IDAT")
    length = struct.unpack(">I", png[at - 4 : at])[0]
    chunk = b"IDAT" + png[at + 4 : at + 6] + b"\xff" * (length - 2)  # keep the 2-byte zlib header
    return (
        png[: at - 4]
        + struct.pack(">I", length)
        + chunk
        + struct.pack(">I", zlib.crc32(chunk))
        + png[at + 4 + length + 4 :]
    )


# Python source that, run as root, lets `nobody` reach the interpreter and the checkout:
# the interpreter may live under /root (pyenv) and the checkout under a 0700 directory
# (CI's mktemp), which nobody cannot traverse. A private mount namespace of the calling
# script (not of the sandbox under test) shows each such directory as a 0755 tmpfs holding
# only the interpreter's directory or the checkout. Expects sys.argv[1] = the checkout.
SHOW_TO_NOBODY = r"""
import ctypes, os, sys, tempfile
libc = ctypes.CDLL(None, use_errno=True)

def mount(src, dst, fstype, flags, data=None):
    enc = lambda v: None if v is None else os.fsencode(v)
    if libc.mount(enc(src), enc(dst), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        raise OSError(ctypes.get_errno(), f"mount {dst}")

def blocked_ancestor(path):  # the first directory on the way to path others cannot traverse
    cur = "/"
    for part in path.split("/")[1:]:
        if not os.stat(cur).st_mode & 0o001:
            return cur
        cur = os.path.join(cur, part)
    return None

blocked = {}
for path in {os.path.realpath(sys.base_prefix), os.path.realpath(sys.argv[1])}:
    ancestor = blocked_ancestor(path)
    if ancestor:
        blocked.setdefault(ancestor, []).append(path)
if blocked:
    assert libc.unshare(0x00020000) == 0
    mount(None, "/", None, (1 << 18) | 16384)  # rprivate
for ancestor, paths in blocked.items():
    kept = []
    for path in paths:
        keep = tempfile.mkdtemp()
        mount(path, keep, None, 4096 | 16384)
        kept.append((path, keep))
    mount("tmpfs", ancestor, "tmpfs", 2 | 4, "mode=0755")
    for path, keep in kept:
        os.makedirs(path, mode=0o755, exist_ok=True)  # root's umask 022: every level 0755
        mount(keep, path, None, 4096 | 16384)
"""

# Python source (one line, so it can prefix runner._BOOT) installing a seccomp filter that
# stands in for a host with neither Landlock (its syscalls: ENOSYS, as on a kernel without
# it) nor user or mount namespaces (unshare and clone with CLONE_NEWUSER/CLONE_NEWNS: EPERM,
# as under Docker's default profile). Inherited by every process started after it.
BLOCK_FS_LAYERS = (
    "import errno, pyseccomp as _sc; _f = _sc.SyscallFilter(_sc.ALLOW); "
    "[_f.add_rule(_sc.ERRNO(errno.ENOSYS), _n) for _n in "
    "('landlock_create_ruleset', 'landlock_add_rule', 'landlock_restrict_self')]; "
    "_f.add_rule(_sc.ERRNO(errno.EPERM), 'unshare'); "
    "[_f.add_rule(_sc.ERRNO(errno.EPERM), 'clone', _sc.Arg(0, _sc.MASKED_EQ, _b, _b)) "
    "for _b in (0x10000000, 0x20000)]; "
    "_f.add_rule(_sc.ERRNO(errno.ENOSYS), 'clone3'); _f.load(); "
)


def zip_patched(data: bytes, *, method: int | None = None, flags: int = 0) -> bytes:
    """Every entry's method and flag bits set in both its local header and its central
    directory entry (zipfile writes neither Deflate64, implode nor encryption). Stored
    entry data must not itself hold a PK header signature."""
    out = bytearray(data)
    for sig, flag_at, method_at in ((b"PK\x03\x04", 6, 8), (b"PK\x01\x02", 8, 10)):
        pos = out.find(sig)
        while pos != -1:
            out[pos + flag_at] |= flags
            if method is not None:
                out[pos + method_at : pos + method_at + 2] = method.to_bytes(2, "little")
            pos = out.find(sig, pos + 4)
    return bytes(out)
