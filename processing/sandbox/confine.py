"""The kernel confinement of a job process, layer by layer (each one can be switched off).

A decoder exploit runs with the job's privileges, so each layer assumes the others failed:

- uid:      as root, a job drops to a dedicated uid/gid (AIRLOCK_SANDBOX_UID/GID, default
            65533, no /etc/passwd entry needed), no supplementary groups, every capability
            gone (effective, permitted, inheritable, ambient, bounding set). Root-owned 0600
            files (the database, stored files, the secret key) are out of its reach, and so
            is every root process's /proc/<pid>/environ. Not root: the worker's own uid stays.
- nnp:      PR_SET_NO_NEW_PRIVS (no setuid binary can give anything back) and the job made
            non-dumpable, so a sibling job of the same uid cannot read its memory; the fork
            server itself is non-dumpable too (set in server.py).
- seccomp:  libseccomp (pyseccomp) filter: no sockets, ptrace, process_vm_*, execve, mount,
            namespaces, bpf, io_uring, keyrings, kernel modules (EPERM; clone3 ENOSYS).
- landlock: the job may read only the Python installation and our code (the imports a
            decoder still does lazily) and write only its own work dir; everything else,
            /proc and the data dir included, is denied; TCP bind/connect denied (ABI 4),
            signals and abstract sockets scoped to the job (ABI 6). The input is an fd the
            server opened, so the job needs no path to it.
- nproc:    RLIMIT_NPROC for the dedicated uid (counted across every job of that uid).
- subreaper: the fork server is PR_SET_CHILD_SUBREAPER: a descendant that setsid()s out of
            the job's process group is re-parented to the server, which kills it (server.py).

AIRLOCK_SANDBOX_CONFINE names the layers to apply (comma-separated, default "all");
`in_force()` says which of them this process can really apply here.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import sys
from pathlib import Path

LAYERS = ("uid", "nnp", "seccomp", "landlock", "nproc", "subreaper")
CONFINE_ENV = "AIRLOCK_SANDBOX_CONFINE"
UID_ENV, GID_ENV = "AIRLOCK_SANDBOX_UID", "AIRLOCK_SANDBOX_GID"
DEFAULT_ID = 65533

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_CHILD_SUBREAPER = 36
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4


class ConfinementError(Exception):
    """A requested layer could not be applied (the job must not run without it)."""


def requested_layers(value: str | None = None) -> tuple[str, ...]:
    raw = (os.environ.get(CONFINE_ENV, "all") if value is None else value).strip().lower()
    if raw in ("", "all"):
        return LAYERS
    if raw == "none":
        return ()
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    unknown = sorted(set(names) - set(LAYERS))
    if unknown:
        raise ValueError(f"{CONFINE_ENV}: unknown layer(s) {', '.join(unknown)}")
    return tuple(n for n in LAYERS if n in names)


def sandbox_ids() -> tuple[int, int]:
    uid = int(os.environ.get(UID_ENV) or DEFAULT_ID)
    gid = int(os.environ.get(GID_ENV) or uid)
    if uid <= 0 or gid <= 0:
        raise ValueError(f"{UID_ENV}/{GID_ENV} must name an unprivileged id, not 0")
    return uid, gid


def _prctl(option: int, arg: int = 0) -> None:
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise ConfinementError(f"prctl({option}): {os.strerror(err)}")


# ---------------------------------------------------------------- landlock
_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446  # x86_64 and arm64 (asm-generic)
_RULE_PATH_BENEATH = 1
_FS_READ = (1 << 2) | (1 << 3)  # READ_FILE | READ_DIR
_FS_WRITE_DIR = _FS_READ | (1 << 1) | (1 << 5) | (1 << 8)  # + WRITE_FILE, REMOVE_FILE, MAKE_REG
_TRUNCATE = 1 << 14  # ABI 3


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when it has none (or it is disabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    abi = _libc.syscall(_SYS_CREATE, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    return int(abi) if abi > 0 else 0


def _handled_fs(abi: int) -> int:
    bits = (1 << 13) - 1  # ABI 1: execute .. make_sym
    if abi >= 2:
        bits |= 1 << 13  # refer
    if abi >= 3:
        bits |= 1 << 14  # truncate
    if abi >= 5:
        bits |= 1 << 15  # ioctl_dev
    return bits


def read_roots() -> list[Path]:
    """What a job may still read: the interpreter's files and our own package (lazy imports)."""
    roots = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
             Path(__file__).resolve().parents[1]}  # processing/, not the repo (var/ lives there)
    return sorted(roots)


def open_read_roots() -> list[int]:
    """O_PATH fds of read_roots(), opened once by the (root) fork server for every job."""
    fds = []
    for root in read_roots():
        try:
            fds.append(os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
        except OSError:
            continue
    return fds


def landlock_ruleset(read_fds: list[int], abi: int) -> int:
    """A ruleset allowing reads beneath read_fds; everything else this ABI knows is denied.

    Built by the spare before its request arrives; landlock_restrict() adds the work dir.
    """
    attr = _RulesetAttr(_handled_fs(abi), 0, 0)
    size = 8
    if abi >= 4:
        attr.net, size = 0b11, 16  # bind_tcp | connect_tcp, never allowed
    if abi >= 6:
        attr.scoped, size = 0b11, 24  # abstract unix sockets | signals outside the job
    ruleset = _libc.syscall(_SYS_CREATE, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        raise ConfinementError(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        for fd in read_fds:
            _add_rule(ruleset, fd, _FS_READ)
    except BaseException:
        os.close(ruleset)
        raise
    return int(ruleset)


def _add_rule(ruleset: int, fd: int, access: int) -> None:
    rule = _PathBeneath(access, fd)
    if _libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
        raise ConfinementError(f"landlock_add_rule: {os.strerror(ctypes.get_errno())}")


def landlock_restrict(ruleset: int, write_dir_fd: int, abi: int) -> None:
    """Add the work dir (read, create, write, remove files) and restrict this process for good."""
    try:
        _add_rule(ruleset, write_dir_fd, _FS_WRITE_DIR | (_TRUNCATE if abi >= 3 else 0))
        if _libc.syscall(_SYS_RESTRICT, ruleset, 0) != 0:
            raise ConfinementError(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)


def landlock(read_fds: list[int], write_dir_fd: int, abi: int) -> None:
    """Restrict this process (and its future children) to read_fds (read) and the dir (write)."""
    landlock_restrict(landlock_ruleset(read_fds, abi), write_dir_fd, abi)


# ---------------------------------------------------------------- seccomp
_DENY = (
    "socket", "connect", "bind", "listen", "accept", "accept4",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "execve", "execveat",
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr",
    "unshare", "setns",
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "open_by_handle_at", "name_to_handle_at", "acct", "swapon", "swapoff", "reboot",
)
_CLONE_NEW = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
              0x40000000, 0x00000080)  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME


def build_seccomp():  # type: ignore[no-untyped-def]
    """The filter (built once in the server; each job loads its inherited copy)."""
    import pyseccomp as sc

    flt = sc.SyscallFilter(sc.ALLOW)
    for name in _DENY:
        try:
            flt.add_rule(sc.ERRNO(errno.EPERM), name)
        except (OSError, RuntimeError, ValueError):
            continue  # a syscall this architecture does not have
    for flag in _CLONE_NEW:
        flt.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    # clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc use clone.
    flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    return flt


def seccomp_available() -> bool:
    try:
        build_seccomp()
    except Exception:  # noqa: BLE001 - no libseccomp, no pyseccomp, no kernel support
        return False
    return True


# ---------------------------------------------------------------- identity
class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def drop_identity(uid: int, gid: int, cap_last: int) -> None:
    """Root -> uid/gid with no groups and no capabilities at all (irreversible)."""
    for cap in range(cap_last + 1):
        _prctl(_PR_CAPBSET_DROP, cap)
    _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)  # clears effective and permitted capabilities
    data = (_CapData * 2)()  # and inheritable, which setuid keeps
    if _libc.capset(ctypes.byref(_CapHeader(0x20080522, 0)), data) != 0:
        raise ConfinementError(f"capset: {os.strerror(ctypes.get_errno())}")
    if os.getuid() != uid or os.geteuid() != uid or os.getegid() != gid:
        raise ConfinementError("the job kept its identity")


def cap_last() -> int:
    try:
        return int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        return 40


def no_new_privs() -> None:
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    _prctl(_PR_SET_DUMPABLE, 0)


def limit_processes(n: int) -> None:
    resource.setrlimit(resource.RLIMIT_NPROC, (n, n))


def make_subreaper() -> None:
    """For the fork server: a job's orphans are re-parented to it, not to init."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def make_undumpable() -> None:
    """For the fork server: its /proc/<pid>/ files (environ, mem) become root's only."""
    _prctl(_PR_SET_DUMPABLE, 0)


def in_force(requested: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The requested layers this process can really apply on this kernel, as this user."""
    layers = requested_layers() if requested is None else requested
    if not sys.platform.startswith("linux"):
        return ()  # every layer is a Linux interface
    possible = {"nnp", "subreaper"}
    if os.geteuid() == 0:
        possible |= {"uid", "nproc"}  # NPROC is per uid: only a uid of our own can take it
    if landlock_abi() >= 1:
        possible.add("landlock")
    if "seccomp" in layers and seccomp_available():
        possible.add("seccomp")
    return tuple(n for n in layers if n in possible)


def describe(layers: tuple[str, ...]) -> str:
    return "+".join(layers) if layers else "none"
