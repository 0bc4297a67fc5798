"""A hostile workload against the files the isolation runs from: the library, its
limits, its preload list, the driver, whatever the stack gave the container.

A pod that could write one of them would change its own isolation, and where the file
is the node's (the same library bind-mounted into every pod) every other pod's too. The
suite does not know where a stack keeps them: it reads them off the container
(``gpushare_conformance/mounted_paths.py``: the mounts a plain pod on the node lacks,
the preload list's libraries, the paths in the variables a plain pod lacks) and tries
each, as the container's root and as an unprivileged user, the ways a process of the
pod can (docs/threat-model.md). Nothing is written: an open for writing that succeeds
is the evidence, and what a granted rename or link made is put back at once.
"""

from __future__ import annotations

import allure
import pytest

from gpushare_conformance import files_probe, mounted_paths
from gpushare_conformance.allocation import Verdict
from gpushare_conformance.fixtures.framework import submit

pytestmark = [pytest.mark.e2e, pytest.mark.isolation, pytest.mark.capacity(cards=1)]

SHARE_GIB = 1
CHECK = "isolation_files_read_only"
# What a share or plain container shows of itself: its mounts, then its preload list.
SELF = "cat /proc/self/mountinfo; echo '--- preload'; cat /etc/ld.so.preload 2>/dev/null; exit 0"


def _self_view(suite, pod: str) -> tuple[list[mounted_paths.Mount], str]:
    """The pod's mounts and its preload list, as a process in it reads them."""
    seen = suite.run_in_pod(pod, ["sh", "-c", SELF], "mountinfo and /etc/ld.so.preload")
    mounts, _, preload = seen.stdout.partition("--- preload")
    return mounted_paths.parse_mountinfo(mounts), preload


def test_the_files_the_isolation_runs_from_are_out_of_the_pods_reach(suite):
    """Every file and directory the stack gave a share pod stays as the stack made it:
    no process of the pod, root or not, writes, truncates, renames, chmods, creates
    beside, or remounts it (docs/threat-model.md)."""
    with allure.step(f"Run a pod with {SHARE_GIB} GiB on one card, and a pod asking no GPU on its node"):
        pod = suite.submit_share_pod("files-share", SHARE_GIB, None)
        obj = suite.wait_running(pod)
        node = obj["spec"]["nodeName"]
        submit.create(suite.kube, suite.namespace, submit.no_gpu_pod(node, "files-plain", suite.suite_image))
        suite.wait_running("files-plain")
    with allure.step("Read the paths the stack gave the share pod: mounts, preload list, variables a plain pod lacks"):
        share_mounts, preload = _self_view(suite, pod)
        plain_mounts, plain_preload = _self_view(suite, "files-plain")
        options = {m.point: m.options for m in mounted_paths.stack_mounts(share_mounts, plain_mounts)}
        # A preload list the image itself carries is no more the stack's than the image.
        preload = "" if preload == plain_preload else preload
        paths, own = mounted_paths.stack_paths(
            share_mounts, plain_mounts, suite.env(pod), suite.env("files-plain"), preload
        )
        listed = "\n".join(f"{p} (mount {options[p]})" if p in options else p for p in paths)
        listed += "".join(f"\n{p} (the container's own, not judged)" for p in own)
        allure.attach(listed or "none", "paths the stack gave the pod", allure.attachment_type.TEXT)
    if not paths:
        suite.not_applicable(
            CHECK,
            f"the stack gives a share pod on {node} no mount a plain pod lacks, no preload list and no path in its variables",
        )
        return
    with allure.step(f"Try to change each of {len(paths)} paths, as root and as uid 65534"):
        args = [f"{'mount' if p in options else 'path'}:{p}" for p in paths]
        result = suite.run_in_pod(pod, ["python3", "-c", files_probe.PROBE, *args], "change the stack's files")
        allure.attach(result.output, "attempts", allure.attachment_type.TEXT)
    attempts = mounted_paths.parse_attempts(result.stdout)
    if "done" not in result.stdout.splitlines() or not attempts:
        pytest.skip(
            suite.not_judged(
                CHECK, f"the attempts did not run in {pod} (exit {result.exit_status}): {result.output.strip()[-300:]}"
            )
        )
    granted = [a for a in attempts if a.granted]
    figure = mounted_paths.words(attempts, len(paths))
    suite.expect(Verdict(CHECK, "0 granted", f"{len(granted)} granted", not granted, figure))
