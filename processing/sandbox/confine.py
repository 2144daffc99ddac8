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
- mountns:  the fallback where the kernel has no Landlock: the job gets a private mount
            namespace (and a user namespace when the worker is not root) whose root is an
            empty tmpfs holding only the same read roots (read-only), its own /proc/<pid>
            and its work dir at /work; the old root is detached, so no other path exists.
- nproc:    RLIMIT_NPROC for the dedicated uid (counted across every job of that uid).
- subreaper: the fork server is PR_SET_CHILD_SUBREAPER: a descendant that setsid()s out of
            the job's process group is re-parented to the server, which kills it (server.py).

AIRLOCK_SANDBOX_CONFINE names the layers to apply (comma-separated, default "all": every
layer, the filesystem confined by Landlock or, on a kernel without it, by mountns; naming
mountns instead of landlock forces the fallback); `in_force()` says which of them this
process can really apply here.

Confinement fails closed: `posture()` compares the two, and a requested layer this host
cannot apply makes the fork server refuse to start (every decoder job is then a transient
infrastructure failure, retried, never run with less) and /readyz fail, unless
AIRLOCK_SANDBOX_ACCEPT_MISSING names that layer: then jobs run without it and /readyz says
"degraded". The same sentences (`Posture.state`, `UNPROTECTED`) go to the log, to
/readyz and to docs/processing.md.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

LAYERS = ("uid", "nnp", "seccomp", "landlock", "mountns", "nproc", "subreaper")
CONFINE_ENV = "AIRLOCK_SANDBOX_CONFINE"
ACCEPT_ENV = "AIRLOCK_SANDBOX_ACCEPT_MISSING"
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
        fallback = "landlock" if landlock_abi() < 1 else "mountns"  # one filesystem layer
        return tuple(n for n in LAYERS if n != fallback)
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
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine, 155) if hasattr(os, "uname") else 155
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
    roots = {
        Path(sys.prefix).resolve(),
        Path(sys.base_prefix).resolve(),
        Path(__file__).resolve().parents[1],
    }  # processing/, not the repo (var/ lives there)
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


# ---------------------------------------------------------------- mount namespace
_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if v is None else os.fsencode(v) for v in (source, target, fstype, data)]
    if _libc.mount(enc[0], enc[1], enc[2], flags, enc[3]) != 0:
        raise ConfinementError(f"mount {target}: {os.strerror(ctypes.get_errno())}")


def _kept_flags(path: str) -> int:
    """The flags a read-only remount must keep (a user namespace may not clear locked ones)."""
    have = os.statvfs(path).f_flag
    pairs = (
        (os.ST_NOSUID, _MS_NOSUID),
        (os.ST_NODEV, _MS_NODEV),
        (os.ST_NOEXEC, _MS_NOEXEC),
        (os.ST_NOATIME, _MS_NOATIME),
        (os.ST_NODIRATIME, _MS_NODIRATIME),
        (os.ST_RELATIME, _MS_RELATIME),
    )
    return sum(ms for st, ms in pairs if have & st)


def _makedirs(path: str) -> None:
    """mkdir -p with 0755 whatever the umask (the server's is 077; a job that drops its uid
    must still traverse them)."""
    parts, at = [p for p in path.split("/") if p], ""
    for part in parts:
        at += "/" + part
        if not os.path.isdir(at):
            os.mkdir(at)
            os.chmod(at, 0o755)


def _bind(source: str, target: str, extra: int) -> None:
    _makedirs(target)
    _mount(source, target, None, _MS_BIND | _MS_REC)
    _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _kept_flags(source) | extra)


def _enter_namespaces() -> None:
    uid, gid = os.geteuid(), os.getegid()
    if _libc.unshare(_CLONE_NEWNS | (0 if uid == 0 else _CLONE_NEWUSER)) != 0:
        raise ConfinementError(f"unshare: {os.strerror(ctypes.get_errno())}")
    if uid != 0:  # map our own ids only: nothing else exists in the namespace
        _prctl(_PR_SET_DUMPABLE, 1)  # else /proc/self/*_map belong to root, not to us
        try:
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                with open(f"/proc/self/{name}", "w") as fh:
                    fh.write(text)
        finally:
            _prctl(_PR_SET_DUMPABLE, 0)
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing we mount leaves this namespace


def private_root(new_root: str, read_roots: list[Path]) -> None:
    """Switch, in a new mount namespace, to a root of our own: a tmpfs mounted on new_root
    (an empty directory) holding read_roots read-only at their own paths and this
    process's /proc/<pid>. The old root stays reachable at /.old until enter_private_root().

    Runs before the request arrives: unmounting the old root would cost a few ms on the
    request's path (an RCU grace period), covering it costs one mount.
    """
    _enter_namespaces()
    _mount("tmpfs", new_root, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "mode=0755,size=64k")
    for root in read_roots:
        _bind(str(root), new_root + str(root), _MS_RDONLY)
    own = f"/proc/{os.getpid()}"
    for name in (str(os.getpid()), "self"):
        try:
            _bind(own, f"{new_root}/proc/{name}", 0)  # libraries read /proc/self/*
        except (ConfinementError, OSError):
            pass  # a job that cannot read its own /proc files still runs
    for name in ("work", ".old"):
        _makedirs(f"{new_root}/{name}")
    if _libc.syscall(_SYS_PIVOT_ROOT, os.fsencode(new_root), os.fsencode(f"{new_root}/.old")) != 0:
        raise ConfinementError(f"pivot_root: {os.strerror(ctypes.get_errno())}")
    os.chdir("/")


def enter_private_root(work_dir: str, work_fd: int) -> None:
    """Bind the work dir (a path in the old root) at /work, then cover the old root for good.

    The cover is an empty read-only tmpfs: nothing beneath it is reachable by path, and
    removing it takes CAP_SYS_ADMIN and umount2, which the job no longer has.
    """
    _mount(f"/.old{work_dir}", "/work", None, _MS_BIND)
    seen, meant = os.stat("/work"), os.fstat(work_fd)
    if (seen.st_dev, seen.st_ino) != (meant.st_dev, meant.st_ino):
        raise ConfinementError("the work dir changed before it was mounted")
    _mount(None, "/work", None, _MS_REMOUNT | _MS_BIND | _kept_flags("/work") | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    _mount("tmpfs", "/.old", "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "mode=0,size=4k")
    _mount(None, "/", None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    os.chdir("/work")


@functools.lru_cache(maxsize=1)
def mountns_available() -> bool:
    """Whether this process may build a private root here (tried once, in a throwaway
    interpreter: the web process that asks for /readyz is multi-threaded, no fork there)."""
    if not sys.platform.startswith("linux"):
        return False
    code = (
        "import importlib.util, sys; spec = importlib.util.spec_from_file_location('c', sys.argv[1]); "
        "c = sys.modules['c'] = importlib.util.module_from_spec(spec); spec.loader.exec_module(c); "
        "c._enter_namespaces()"
    )  # in sys.modules: a dataclass looks its module up there
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", code, str(Path(__file__).resolve())],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def drop_capabilities(cap_last: int) -> None:
    """Give up every capability (those a user namespace grants its creator included)."""
    for cap in range(cap_last + 1):
        _prctl(_PR_CAPBSET_DROP, cap)
    _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(_CapHeader(0x20080522, 0)), data) != 0:
        raise ConfinementError(f"capset: {os.strerror(ctypes.get_errno())}")


# ---------------------------------------------------------------- seccomp
_DENY = (
    "socket",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "execve",
    "execveat",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "open_by_handle_at",
    "name_to_handle_at",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
)
_CLONE_NEW = (
    0x00020000,
    0x02000000,
    0x04000000,
    0x08000000,
    0x10000000,
    0x20000000,
    0x40000000,
    0x00000080,
)  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME


def build_seccomp():
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
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


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
    if "mountns" in layers and "landlock" not in (set(layers) & possible) and mountns_available():
        possible.add("mountns")  # the fallback: only when Landlock is not what confines the filesystem
    if "seccomp" in layers and seccomp_available():
        possible.add("seccomp")
    return tuple(n for n in layers if n in possible)


def describe(layers: tuple[str, ...]) -> str:
    return "+".join(layers) if layers else "none"


# ---------------------------------------------------------------- fail closed
# What a decoder exploit can do when a layer is not applied (the other layers may still
# stop part of it). /readyz lists these for every missing layer; docs/processing.md quotes them.
UNPROTECTED = {
    "uid": "jobs run as the worker's own uid: what the worker's uid can read, write or signal "
    "is theirs too unless another layer stops it",
    "nnp": "a setuid binary could raise a job's privileges, and the fork server's and the "
    "jobs' memory and /proc files are open to other processes of the same uid",
    "seccomp": "jobs may open sockets (the network, the database, the broker), ptrace, execve and create namespaces",
    "landlock": "jobs may read every file their uid can read (the worker's code, settings and "
    "data directory, /proc), write wherever their uid can, and connect to TCP ports "
    "and signal processes outside the job unless seccomp or uid stops it",
    "mountns": "jobs may read every file their uid can read (the worker's code, settings and "
    "data directory, /proc) and write wherever their uid can",
    "nproc": "a job may fork without limit",
    "subreaper": "a process a job leaves outside its process group (setsid) outlives the job",
}


def accepted_missing(value: str | None = None) -> tuple[str, ...]:
    """The layers AIRLOCK_SANDBOX_ACCEPT_MISSING allows jobs to run without (comma-separated)."""
    raw = (os.environ.get(ACCEPT_ENV, "") if value is None else value).strip().lower()
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    unknown = sorted(set(names) - set(LAYERS))
    if unknown:
        raise ValueError(f"{ACCEPT_ENV}: unknown layer(s) {', '.join(unknown)}")
    return tuple(n for n in LAYERS if n in names)


_FS_LAYERS = {"landlock", "mountns"}


@dataclass(frozen=True)
class Posture:
    """The requested layers, those this process can apply, and whether jobs may run."""

    requested: tuple[str, ...]
    in_force: tuple[str, ...]
    accepted: tuple[str, ...]  # AIRLOCK_SANDBOX_ACCEPT_MISSING
    every: tuple[str, ...] = ()  # what "all" asks for here

    @property
    def switched_off(self) -> tuple[str, ...]:
        """Layers AIRLOCK_SANDBOX_CONFINE leaves out (a filesystem layer counts for both)."""
        asked = set(self.requested) | (_FS_LAYERS if _FS_LAYERS & set(self.requested) else set())
        return tuple(n for n in self.every if n not in asked)

    @property
    def missing(self) -> tuple[str, ...]:
        # landlock and mountns both confine the filesystem: asked for together, one is enough.
        applied = set(self.in_force) | (_FS_LAYERS if _FS_LAYERS & set(self.in_force) else set())
        return tuple(n for n in self.requested if n not in applied)

    @property
    def refused(self) -> tuple[str, ...]:
        """Missing layers nobody accepted: while there is one, no decoder job runs."""
        return tuple(n for n in self.missing if n not in self.accepted)

    @property
    def state(self) -> str:
        """One sentence for the log and /readyz (checks.sandbox.state)."""
        if self.refused:
            return (
                f"refused: {', '.join(self.refused)} not applied (not accepted by {ACCEPT_ENV}); "
                "decoder jobs do not run"
            )
        weaker = []
        if self.missing:
            weaker.append(f"{', '.join(self.missing)} not applied (accepted by {ACCEPT_ENV})")
        if self.switched_off:
            weaker.append(f"{', '.join(self.switched_off)} switched off (by {CONFINE_ENV})")
        if weaker:
            return "degraded: " + "; ".join(weaker)
        return f"complete: {describe(self.in_force)} applied"

    def unprotected(self) -> dict[str, str]:
        """What a job is not protected from, for each layer it does not get."""
        return {n: UNPROTECTED[n] for n in LAYERS if n in self.missing or n in self.switched_off}


def posture(requested: tuple[str, ...] | None = None) -> Posture:
    """Probe this host (ValueError on an unknown layer name in either setting)."""
    layers = requested_layers() if requested is None else requested
    accepted = accepted_missing()
    return Posture(layers, in_force(layers), accepted, requested_layers("all"))
