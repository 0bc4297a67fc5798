"""The program a pod runs to try to change the files its stack gave it
(``conformance/test_isolation_files.py``); ``mounted_paths.parse_attempts`` reads what it prints.

It writes nothing: an open for writing that succeeds is the evidence, truncate and chmod
keep the size and mode, and what a granted rename, link or create made is undone at once.
"""

from __future__ import annotations

# Run as root in the container (its default user), then again as an unprivileged user
# (uid 65534) where the container runs as root. Each argument is "mount:PATH" (a mount
# point the stack made) or "path:PATH"; directories are walked. For every regular file:
# open for writing (by its path, through /proc/self/root, through a symlink in /tmp,
# through /proc/<pid>/fd of another process holding it open for reading, through a hard
# link in /tmp), truncate to its own size, chmod to its own mode, rename away (and back);
# for every directory: create a file in it (then remove it), chmod to its own mode,
# rename away (and back); for every mount point, as root: remount it read-write. A line
# per attempt: "granted|refused uid N OP PATH [ERRNO]".
PROBE = r"""
import ctypes, errno, os, stat, sys
NOBODY = 65534
MAX_ENTRIES = 300
TAG = ".gpushare-probe-%d" % os.getpid()
MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096

def name(exc):
    return errno.errorcode.get(exc.errno, str(exc.errno))

def shown(path):
    return path.replace(" ", "\\040")

def expand(args):
    entries, mounts = [], []
    for arg in args:
        kind, _, path = arg.partition(":")
        if kind == "mount":
            mounts.append(path)
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            print("absent", shown(path), name(exc))
            continue
        if stat.S_ISREG(mode):
            entries.append(("file", path))
        elif stat.S_ISDIR(mode):
            for root, dirs, files in os.walk(path):
                dirs.sort()
                entries.append(("dir", root))
                for f in sorted(files):
                    full = os.path.join(root, f)
                    if stat.S_ISREG(os.lstat(full).st_mode):
                        entries.append(("file", full))
                if len(entries) > MAX_ENTRIES:
                    print("cut", shown(path), "after", MAX_ENTRIES, "entries")
                    break
        else:
            print("skipped", shown(path), "not a file or directory")
    seen, out = set(), []
    for kind, path in entries:
        if path not in seen:
            seen.add(path)
            out.append((kind, path, os.stat(path)))
    return out, mounts

def attempt(user, op, path, action):
    try:
        action()
    except OSError as exc:
        print("refused", user, op, shown(path), name(exc))
        return
    print("granted", user, op, shown(path))

def opened_for_write(path):
    os.close(os.open(path, os.O_WRONLY))

def moved_and_back(path):
    os.rename(path, path + TAG)
    os.rename(path + TAG, path)

def created_in(directory):
    beside = os.path.join(directory, TAG)
    os.close(os.open(beside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    os.unlink(beside)

def through_symlink(path):
    link = "/tmp/%s-symlink" % TAG
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(path, link)
    try:
        opened_for_write(link)
    finally:
        os.unlink(link)

def through_hard_link(path):
    link = "/tmp/%s-link" % TAG
    if os.path.lexists(link):
        os.unlink(link)
    os.link(path, link)
    try:
        opened_for_write(link)
    finally:
        os.unlink(link)

def remounted(path):
    libc = ctypes.CDLL(None, use_errno=True)
    was_ro = os.statvfs(path).f_flag & os.ST_RDONLY
    if libc.mount(None, path.encode(), None, MS_REMOUNT | MS_BIND, None) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    if was_ro:
        libc.mount(None, path.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)

def tries(user, entries, mounts, holder, held):
    for kind, path, mode in entries:
        if kind == "file":
            attempt(user, "write", path, lambda: opened_for_write(path))
            attempt(user, "write-via-/proc/self/root", path, lambda: opened_for_write("/proc/self/root" + path))
            attempt(user, "write-via-symlink", path, lambda: through_symlink(path))
            attempt(user, "write-via-hard-link", path, lambda: through_hard_link(path))
            if path in held:
                fd_path = "/proc/%d/fd/%d" % (holder, held[path])
                attempt(user, "write-via-/proc/pid/fd", path, lambda: opened_for_write(fd_path))
            attempt(user, "truncate", path, lambda: os.truncate(path, mode.st_size))
        else:
            attempt(user, "create-inside", path, lambda: created_in(path))
        attempt(user, "chmod", path, lambda: os.chmod(path, stat.S_IMODE(mode.st_mode)))
        attempt(user, "rename", path, lambda: moved_and_back(path))
    if user == "uid 0":
        for path in mounts:
            attempt(user, "remount-rw", path, lambda: remounted(path))

def as_user(uid, entries, mounts, holder, held):
    pid = os.fork()
    if pid == 0:
        try:
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            tries("uid %d" % os.geteuid(), entries, mounts, holder, held)
        except Exception as exc:
            print("error", repr(exc))
        finally:
            sys.stdout.flush()
            os._exit(0)
    os.waitpid(pid, 0)

entries, mounts = expand(sys.argv[1:])
held = {}
for kind, path, _mode in entries:
    if kind == "file":
        try:
            held[path] = os.open(path, os.O_RDONLY)
        except OSError:
            pass
sys.stdout.flush()
as_user(None, entries, mounts, os.getpid(), held)
if os.geteuid() == 0:
    as_user(NOBODY, entries, mounts, os.getpid(), held)
print("done")
"""
