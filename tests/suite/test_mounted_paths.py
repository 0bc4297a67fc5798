"""The paths a stack gave a container, read off its mountinfo, preload list and variables,
and the words the check quotes (gpushare_conformance/mounted_paths.py)."""

from __future__ import annotations

import pytest

from gpushare_conformance import mounted_paths as mp

# What a process of the reference stack's share pod and of a plain pod read (trimmed).
COMMON = """\
1530 1229 0:412 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/l,upperdir=/u
1531 1530 0:415 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
1535 1530 0:416 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
1540 1530 253:1 /var/lib/kubelet/pods/x/etc-hosts /etc/hosts rw,relatime - ext4 /dev/vda1 rw
1541 1530 0:380 / /var/run/secrets/kubernetes.io/serviceaccount ro,relatime - tmpfs tmpfs rw
"""
SHARE = (
    COMMON
    + """\
1542 1530 253:1 /var/lib/gpushare/native /usr/local/gpushare ro,relatime - ext4 /dev/vda1 rw
1543 1530 253:1 /var/lib/gpushare/containers/u-0/limits /etc/gpushare/limits ro,relatime - ext4 /dev/vda1 rw
1544 1530 253:1 /var/lib/gpushare/containers/u-0/ld.so.preload /etc/ld.so.preload ro,relatime - ext4 /dev/vda1 rw
1545 1535 0:5 /null /dev/nvidia0 rw,nosuid - devtmpfs udev rw
1546 1531 0:22 /driver/nvidia /proc/driver/nvidia ro,nosuid - proc proc rw
1547 1530 0:5 /null /var/run/nvidia-container-devices/GPU-1 rw,nosuid - devtmpfs udev rw
1548 1530 253:1 /opt/My\\040Lib /opt/my\\040lib ro,relatime - ext4 /dev/vda1 rw
"""
)


def test_the_stacks_mounts_are_those_a_plain_pod_lacks_outside_the_kernels_trees():
    found = mp.stack_mounts(mp.parse_mountinfo(SHARE), mp.parse_mountinfo(COMMON))
    assert [m.point for m in found] == [
        "/usr/local/gpushare",
        "/etc/gpushare/limits",
        "/etc/ld.so.preload",
        "/opt/my lib",
    ]
    assert found[0].options.startswith("ro") and found[0].fstype == "ext4"


def test_paths_add_the_preload_lists_libraries_and_the_variables_a_plain_pod_lacks_once_each():
    share_env = {
        "PATH": "/usr/local/bin:/usr/bin",
        "LD_PRELOAD": "/usr/local/gpushare/lib/libgpushare-shim.so",
        "GPUSHARE_USAGE_FILE": "/run/gpushare/usage",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/tmp/vgpu/cache",
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64",
        "HOSTNAME": "files-share",
        "NVIDIA_VISIBLE_DEVICES": "GPU-1,GPU-2",
    }
    plain_env = {"PATH": "/usr/local/bin:/usr/bin", "HOSTNAME": "files-plain"}
    paths, own = mp.stack_paths(
        mp.parse_mountinfo(SHARE),
        mp.parse_mountinfo(COMMON),
        share_env,
        plain_env,
        "/usr/local/gpushare/lib/libgpushare-shim.so\n",
    )
    assert paths == [
        "/usr/local/gpushare",
        "/etc/gpushare/limits",
        "/etc/ld.so.preload",
        "/opt/my lib",
        "/usr/local/gpushare/lib/libgpushare-shim.so",  # on the stack's mount
    ]
    # On the container's own layer (no mount of the stack's): the pod's, as its variables are.
    assert own == ["/run/gpushare/usage", "/tmp/vgpu/cache", "/usr/local/nvidia/lib64"]


def test_a_stack_that_gives_nothing_has_no_paths():
    plain = mp.parse_mountinfo(COMMON)
    assert mp.stack_paths(plain, plain, {"A": "1"}, {"A": "1"}, "") == ([], [])


def test_a_path_lies_on_the_longest_mount_above_it():
    mounts = mp.parse_mountinfo(SHARE)
    assert mp.mount_of("/usr/local/gpushare/lib/x.so", mounts) == "/usr/local/gpushare"
    assert mp.mount_of("/usr/local/gpushare-other", mounts) == "/"
    assert mp.mount_of("/etc/gpushare/limits", mounts) == "/etc/gpushare/limits"


def test_a_mountinfo_line_that_cannot_be_read_is_named():
    with pytest.raises(mp.MountinfoError, match=r"mountinfo line 2 .*'garbage'"):
        mp.parse_mountinfo(COMMON.splitlines()[0] + "\ngarbage\n")


OUTPUT = """\
absent /run/gpushare/usage ENOENT
refused uid 0 write /etc/gpushare/limits EROFS
refused uid 0 rename /etc/gpushare/limits EBUSY
refused uid 0 remount-rw /etc/gpushare/limits EPERM
refused uid 65534 write /etc/gpushare/limits EROFS
done
"""


def test_refusals_are_counted_by_reason_and_user():
    attempts = mp.parse_attempts(OUTPUT)
    assert len(attempts) == 4 and not any(a.granted for a in attempts)
    assert mp.words(attempts, 1) == (
        "refused 4 of 4 operations on 1 paths the stack gave the pod (as uid 0 and uid 65534): "
        "EROFS 2, EBUSY 1, EPERM 1"
    )


def test_a_granted_operation_is_quoted_with_its_path_and_user():
    attempts = mp.parse_attempts(OUTPUT + "granted uid 0 write /etc/ld.so.preload\n")
    assert mp.words(attempts, 2) == (
        "granted 1 of 5 operations on 2 paths the stack gave the pod (as uid 0 and uid 65534): "
        "write /etc/ld.so.preload as uid 0"
    )


def _tree(root) -> dict[str, tuple[bytes, int]]:
    return {str(p): (p.read_bytes() if p.is_file() else b"", p.stat().st_mode) for p in sorted(root.rglob("*"))}


def test_the_probe_finds_what_its_user_may_change_and_leaves_it_as_it_was(tmp_path):
    """Run here on a tree its user owns: every attempt is granted, and nothing changed."""
    import os
    import subprocess
    import sys

    from gpushare_conformance.files_probe import PROBE

    stack = tmp_path / "stack"
    (stack / "lib").mkdir(parents=True)
    (stack / "lib" / "libshim.so").write_bytes(b"\x7fELF shim")
    (stack / "limits").write_text("GPUSHARE_MEMORY_LIMIT_0=1GiB\n")
    (stack / "limits").chmod(0o444)
    before = _tree(stack)
    args = [f"path:{stack}", f"path:{stack / 'limits'}", f"path:{tmp_path / 'gone'}"]
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60, check=True)
    attempts = mp.parse_attempts(out.stdout)
    mine = [a for a in attempts if a.user == f"uid {os.geteuid()}"]
    ops = {a.op for a in mine}
    assert {"write", "truncate", "chmod", "rename", "create-inside", "write-via-/proc/pid/fd"} <= ops, ops
    # Written files it may open are opened; 0444 stops only a user without CAP_DAC_OVERRIDE.
    assert all(a.granted for a in mine if a.op != "write" or os.geteuid() == 0 or "limits" not in a.path), mine
    assert f"absent {tmp_path / 'gone'} ENOENT" in out.stdout and out.stdout.rstrip().endswith("done")
    assert _tree(stack) == before
    if os.geteuid() == 0:  # tmp_path is the owner's alone: another user reaches none of it
        others = [a for a in attempts if a.user == "uid 65534"]
        assert others and not any(a.granted for a in others), others
