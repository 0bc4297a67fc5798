"""Which paths a stack put into a share pod's container, read from evidence, and what a
process of the pod managed to do to them.

Any stack's isolation runs from files it gives the container: a library, its limits, a
preload list, the driver. The suite does not know where a stack keeps them, so it reads
them off the container: the mounts a share pod has that a plain pod (no GPU, same
image, same node) lacks, the libraries its ``/etc/ld.so.preload`` names, and the
absolute paths in the variables the plain pod lacks, where they lie on one of those
mounts (a directory of the container's own layer, where a runtime binds the driver's
files, is the pod's as much as its variables are). ``conformance/test_isolation_files.py``
then tries to change each of them from the pod and words what it saw here.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# Kernel filesystems and device trees: the card's device nodes and the driver's /proc
# files are opened for writing by any CUDA process; they hold no file of the isolation.
PSEUDO_FS = frozenset({"proc", "sysfs", "devpts", "mqueue", "cgroup", "cgroup2", "devtmpfs", "securityfs"})
KERNEL_TREES = ("/proc", "/sys", "/dev")
_OCTAL = re.compile(r"\\([0-7]{3})")
_PATH_TOKEN = re.compile(r"[:;,\s=]+")


class MountinfoError(ValueError):
    """A /proc/self/mountinfo line that cannot be read."""


@dataclass(frozen=True)
class Mount:
    point: str
    fstype: str
    options: str  # the mount's own options (field 6: ro or rw first)


@dataclass(frozen=True)
class Attempt:
    """One operation on one path, as one user of the pod, and how it ended."""

    user: str  # "uid 0", "uid 65534"
    op: str
    path: str
    granted: bool
    reason: str  # errno name when refused


def _unescape(field: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of a /proc/<pid>/mountinfo text (proc(5)): mount point, type, options."""
    mounts = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 6 or not rest:
            raise MountinfoError(
                f"mountinfo line {number} is not 'id parent dev root point options ... - type': {line!r}"
            )
        mounts.append(Mount(_unescape(fields[4]), rest[0], fields[5]))
    return mounts


def _in_kernel_tree(path: str) -> bool:
    return any(path == tree or path.startswith(tree + "/") for tree in KERNEL_TREES)


def stack_mounts(share: Iterable[Mount], plain: Iterable[Mount]) -> list[Mount]:
    """The share container's mounts at points the plain container has none at, kernel
    filesystems and device trees aside."""
    plain_points = {m.point for m in plain}
    return [
        m for m in share if m.point not in plain_points and m.fstype not in PSEUDO_FS and not _in_kernel_tree(m.point)
    ]


def env_paths(share_env: Mapping[str, str], plain_env: Mapping[str, str]) -> list[str]:
    """Absolute paths in the share container's variables that the plain one lacks or
    holds otherwise (``LD_PRELOAD``, an accounting file's variable, any stack's)."""
    paths = []
    for key, value in share_env.items():
        if plain_env.get(key) == value:
            continue
        paths += [token for token in _PATH_TOKEN.split(value) if token.startswith("/") and len(token) > 1]
    return paths


def preload_paths(text: str) -> list[str]:
    """The libraries an /etc/ld.so.preload names (ld.so(8): separated by white space or ':')."""
    return [token for token in re.split(r"[\s:]+", text) if token.startswith("/")]


def mount_of(path: str, mounts: Iterable[Mount]) -> str:
    """The mount point ``path`` lies on: the longest one above it (the last mounted wins)."""
    best = "/"
    for m in mounts:
        point = m.point.rstrip("/") or "/"
        inside = path == point or path.startswith(point + "/") or point == "/"
        if inside and len(point) >= len(best):
            best = point
    return best


def stack_paths(
    share_mounts: list[Mount],
    plain_mounts: list[Mount],
    share_env: Mapping[str, str],
    plain_env: Mapping[str, str],
    preload: str = "",
) -> tuple[list[str], list[str]]:
    """Every path the stack gave the share container, once each, in order; and the paths
    its preload list and variables name that lie on the container's own layers or on
    mounts every pod has (the pod's already, as its variables are: not judged here)."""
    mounts = stack_mounts(share_mounts, plain_mounts)
    points = {m.point for m in mounts}
    named = [p.rstrip("/") or "/" for p in preload_paths(preload) + env_paths(share_env, plain_env)]
    judged = [m.point for m in mounts] + [p for p in named if mount_of(p, share_mounts) in points]
    own = [p for p in named if mount_of(p, share_mounts) not in points and not _in_kernel_tree(p)]
    unique = list(dict.fromkeys(judged))
    return unique, [p for p in dict.fromkeys(own) if p not in unique]


RESULT = re.compile(r"^(granted|refused) (uid \d+) (\S+) (\S+)(?: (\S+))?$")


def parse_attempts(output: str) -> list[Attempt]:
    """The probe's ``granted|refused uid N OP PATH [ERRNO]`` lines (paths with no white space)."""
    attempts = []
    for line in output.splitlines():
        m = RESULT.match(line.strip())
        if m:
            attempts.append(Attempt(m.group(2), m.group(3), m.group(4), m.group(1) == "granted", m.group(5) or ""))
    return attempts


def words(attempts: list[Attempt], paths: int) -> str:
    """What a person would quote: the operations granted first (path, operation, user),
    else how many were refused and why."""
    granted = [a for a in attempts if a.granted]
    users = sorted({a.user for a in attempts})
    scope = f"{len(attempts)} operations on {paths} paths the stack gave the pod (as {' and '.join(users) or 'nobody'})"
    if granted:
        shown = "; ".join(f"{a.op} {a.path} as {a.user}" for a in granted[:8])
        more = f" and {len(granted) - 8} more" if len(granted) > 8 else ""
        return f"granted {len(granted)} of {scope}: {shown}{more}"
    why = Counter(a.reason or "refused" for a in attempts)
    return f"refused {len(attempts)} of {scope}: " + ", ".join(f"{r} {n}" for r, n in why.most_common())
