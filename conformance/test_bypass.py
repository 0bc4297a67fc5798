"""A hostile workload tries, each way alone, to take more than its share, or cards at all.

Isolation is a security promise (docs/threat-model.md): what a pod can change, its
environment, its files, its processes, must not lift its share. Each check runs a pod
with a share on one card, makes one attempt, and then asks one MiB past what is left of
the share: the stack passes when that is refused. The attempts are the stack's, not
ours: the variables tried are whatever the container's environment holds that looks
like a limit or the isolation's own, the files tried are whatever a process using the
card maps shared and writable, so the checks judge any stack.
"""

from __future__ import annotations

import json
import re
import shlex
import time

import allure
import pytest

from gpushare_conformance import calibration, names
from gpushare_conformance.allocation import Verdict, card_totals_mib, check_card_total
from gpushare_conformance.dra_request import CLAIM_REFERENCE
from gpushare_conformance.fixtures.framework import dra, evidence, extender, podstate, submit
from gpushare_conformance.fixtures.framework import verdicts as v
from gpushare_conformance.fixtures.framework.evidence import ProgramMissing

pytestmark = [pytest.mark.e2e, pytest.mark.isolation, pytest.mark.capacity(cards=1)]

OOM = names.OOM_ERROR
SHARE_GIB = 1
# What a workload would change to lift its limit: limit-looking variables and the
# isolation's own (the preload, any stack's prefixes). The cards' selection
# (*_VISIBLE_DEVICES) and the mock driver's own settings are not the isolation's.
ISOLATION_VARIABLE = re.compile(r"LIMIT|^LD_PRELOAD$|^GPUSHARE_|^ALIYUN_COM_GPU|^CUDA_DEVICE_MEMORY|^CUDA_DEVICE_SM")
NOT_ISOLATION = re.compile(r"VISIBLE_DEVICES$|^GPUSHARE_MOCK_|^NVIDIA_")


def _share_pod(suite, name: str) -> tuple[str, int]:
    """A pod with SHARE_GIB on one card, and the share in MiB as nvidia-smi shows it."""
    with allure.step(f"Run a pod with {SHARE_GIB} GiB on one card"):
        pod = suite.submit_share_pod(name, SHARE_GIB, None)
        obj = suite.wait_running(pod)
    shown = card_totals_mib(suite.nvidia_smi_exec(pod))[0]
    suite.expect(check_card_total(shown, SHARE_GIB, suite.physical_mib(obj, 0)))
    return pod, shown


def isolation_variables(env: dict[str, str]) -> dict[str, str]:
    return {k: val for k, val in env.items() if ISOLATION_VARIABLE.search(k) and not NOT_ISOLATION.search(k)}


def raised(value: str, factor: int = 16) -> str:
    """Every number in ``value`` times ``factor``, units kept ("4096m" -> "65536m")."""
    return re.sub(r"\d+", lambda m: str(int(m.group()) * factor), value)


def _past_share(suite, pod: str, shown: int, prefix: list[str], what: str, check: str) -> None:
    past = shown + 1
    with allure.step(f"{what}: allocating {past} MiB (past the {shown} MiB share) fails with {OOM}"):
        result = suite.run_in_pod(pod, [*prefix, *suite.probe_argv(0, past)], f"{what}: probe {past} MiB")
        suite.expect(v.fails_with(check, result.exit_status, result.output, OOM, f"{past} MiB ({what})"))


def test_clearing_the_isolation_variables_lifts_no_share(suite):
    pod, shown = _share_pod(suite, "bypass-unset")
    found = isolation_variables(suite.env(pod))
    unset = sorted(found)
    suite.info("isolation_variables", f"the container's isolation variables: {unset or 'none'}")
    prefix = ["env", *(f"--unset={name}" for name in unset)]
    _past_share(suite, pod, shown, prefix, f"with {', '.join(unset) or 'nothing'} unset", "env_cleared_past_share")


def test_raising_the_limit_variables_lifts_no_share(suite):
    pod, shown = _share_pod(suite, "bypass-raise")
    found = {k: val for k, val in isolation_variables(suite.env(pod)).items() if re.search(r"\d", val)}
    changed = {k: raised(val) for k, val in found.items() if k != "LD_PRELOAD"}
    prefix = ["env", *(f"{k}={val}" for k, val in sorted(changed.items()))]
    shown_change = ", ".join(f"{k}={val}" for k, val in sorted(changed.items())) or "no variable with a figure"
    _past_share(suite, pod, shown, prefix, f"with {shown_change}", "env_raised_past_share")


def test_a_shell_started_by_exec_gets_no_more_than_the_share(suite):
    pod, shown = _share_pod(suite, "bypass-shell")
    past = shown + 1
    line = " ".join(shlex.quote(a) for a in suite.probe_argv(0, past))
    with allure.step(f"A login shell started by exec allocates {past} MiB (past the share)"):
        result = suite.run_in_pod(pod, ["sh", "-l", "-c", line], f"sh -l -c probe {past} MiB")
        suite.expect(
            v.fails_with(
                "exec_shell_past_share",
                result.exit_status,
                result.output,
                OOM,
                f"{past} MiB from a shell started by exec",
            )
        )


# The files a process using the card keeps for its accounting, whatever the stack: those
# it maps shared and writable (HAMi-core's shared cache, an interposition library's
# counters) and the regular files it holds open (a lock-based ledger), but its
# standard input and outputs.
# Device files are the driver's; so is the mock driver's node-wide process table (it
# stands for the kernel driver's own state, which no workload can write on a real node).
# Then one forgery over each of them, as any process of the pod can make it:
#   snapshot DIR  copy each file into DIR (the accounting before the holder allocates)
#   zeroed        write zeros over each file, in place
#   rolled back   write each file's copy from DIR back over it, in place
#   replaced      put a copy of each file in its place (a new file at its path)
FORGE_ACCOUNTING = r"""
mode=$1 pid=$2 dir=$3
files() {
  { awk '$2 ~ /^rw.s$/ && $6 ~ /^\// {print $6}' /proc/$pid/maps
    for fd in /proc/$pid/fd/*; do
      case ${fd##*/} in 0|1|2) continue ;; esac
      f=$(readlink "$fd") || continue
      [ -f "$f" ] && echo "$f"
    done
  } | grep -v -e '^/dev/' -e '^/proc/' -e 'gpushare-mock' -e ' (deleted)$' | sort -u
}
key() { echo "$1" | tr / _; }
mkdir -p "$dir"
for f in $(files); do
  size=$(wc -c < "$f")
  case $mode in
    snapshot) cp "$f" "$dir/$(key "$f")" && echo "copied $f ($size bytes)" ;;
    zeroed)
      if dd if=/dev/zero of="$f" bs="$size" count=1 conv=notrunc 2>/tmp/gpushare-forge-err; then
        echo "zeroed $f ($size bytes)"
      else
        echo "kept $f: $(tail -n 1 /tmp/gpushare-forge-err)"
      fi ;;
    "rolled back")
      if [ ! -f "$dir/$(key "$f")" ]; then
        echo "kept $f: no copy from before"
      elif dd if="$dir/$(key "$f")" of="$f" conv=notrunc 2>/tmp/gpushare-forge-err; then
        echo "rolled back $f ($size bytes)"
      else
        echo "kept $f: $(tail -n 1 /tmp/gpushare-forge-err)"
      fi ;;
    replaced)
      if cp "$f" "$f.gpushare-new" 2>/tmp/gpushare-forge-err && mv -f "$f.gpushare-new" "$f" 2>/tmp/gpushare-forge-err; then
        echo "replaced $f ($size bytes)"
      else
        rm -f "$f.gpushare-new"; echo "kept $f: $(tail -n 1 /tmp/gpushare-forge-err)"
      fi ;;
  esac
done
echo "done"
"""
FORGERIES = ("zeroed", "rolled back", "replaced")


@pytest.mark.parametrize("forgery", FORGERIES)
def test_overwriting_the_accounting_lifts_no_share(suite, forgery):
    """A process of the pod forges the accounting of a process holding memory: zeroes
    its files, rolls them back to before it allocated, or puts new files in their
    place. A process asking past what the holder left must still be refused."""
    pod, shown = _share_pod(suite, f"bypass-{forgery.replace(' ', '-')}")
    told = suite.told(pod, 0)
    held = calibration.within_told(told.free_mib) // 2
    snapshot = "/tmp/gpushare-accounting-before"
    with allure.step("A first process holds 1 MiB; its accounting files are copied"):
        first = suite.start_holder(pod, "first", 0, 1)
        copied = suite.run_in_pod(pod, ["sh", "-c", FORGE_ACCOUNTING, "sh", "snapshot", str(first), snapshot], "copy")
        suite.expect(v.exit_ok("accounting_copied", copied.exit_status, copied.output, "copying the accounting"))
    with allure.step(f"A second process holds {held} MiB of the {shown} MiB share"):
        pid = suite.start_holder(pod, "holder", 0, held)
    with allure.step(f"Another process: {forgery}, every file the holder keeps for its accounting"):
        forged = suite.run_in_pod(pod, ["sh", "-c", FORGE_ACCOUNTING, "sh", forgery, str(pid), snapshot], forgery)
        suite.expect(v.exit_ok("accounting_forged", forged.exit_status, forged.output, f"{forgery}: the files"))
        files = [line for line in forged.stdout.splitlines() if line != "done"]
        suite.info(f"accounting_files[{forgery}]", "; ".join(files) or "the holder keeps no writable file")
    over = shown - held + 1
    with allure.step(f"Asking {over} MiB (what the holder left, plus 1 MiB) fails with {OOM}"):
        result = suite.probe(pod, 0, over)
        done = "; ".join(files) or "no file found"
        suite.expect(
            v.fails_with(
                f"forged_accounting_past_share[{forgery}]",
                result.exit_status,
                result.output,
                OOM,
                f"{over} MiB while {held} of {shown} MiB are held, after: {done}",
            )
        )


def test_a_grandchild_draws_from_the_same_budget(suite):
    pod, shown = _share_pod(suite, "bypass-grandchild")
    told = suite.told(pod, 0)
    held = calibration.within_told(told.free_mib) // 2
    over = shown - held + 1
    grandchild = " ".join(shlex.quote(a) for a in suite.probe_argv(0, over))
    with allure.step(f"A process holding {held} MiB starts a shell, whose child asks {over} MiB (the rest plus 1 MiB)"):
        result = suite.probe(pod, 0, held, "--then-exec", "sh", "-c", f"{grandchild}; exit $?")
        suite.expect(
            v.fails_with(
                "grandchild_past_budget",
                result.exit_status,
                result.output,
                OOM,
                f"a grandchild's {over} MiB while its grandparent holds {held} of {shown} MiB",
            )
        )


# A pod posts a bind for another pod to the extender's own address, as the scheduler
# would: the extender must refuse it (only the scheduler may call its verbs).
# Posts the bind to each URL given (plain HTTP and HTTPS, the server's certificate not
# checked: an attacker has no reason to), one answer a line.
POST_BIND = r"""
import json, ssl, sys, urllib.error, urllib.request
insecure = ssl.create_default_context()
insecure.check_hostname = False
insecure.verify_mode = ssl.CERT_NONE
for url in sys.argv[2:]:
    request = urllib.request.Request(url, data=sys.argv[1].encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10, context=insecure) as reply:
            print(url, reply.status, reply.read().decode(errors="replace")[:300])
    except urllib.error.HTTPError as exc:
        print(url, exc.code, exc.read().decode(errors="replace")[:300])
    except Exception as exc:
        print(url, "unreachable", repr(exc)[:300])
"""


def _no_gpu_pod(suite, name: str, env: dict[str, str] | None = None) -> dict:
    """A pod on the GPU node that asks no GPU at all, holding (any pod can be one)."""
    return submit.no_gpu_pod(suite.node.node, name, suite.suite_image, env)


ANSWERED = re.compile(r"^(\S+) (\d{3}) ", re.M)


def refused_everywhere(output: str, urls: list[str]) -> bool:
    """Whether every URL's line says its connection was refused (an address where nothing
    listens for a pod), as POST_BIND and the extender checks print them."""
    lines = {line.split(" ", 1)[0]: line for line in output.splitlines() if line.strip()}
    return bool(urls) and all("Connection refused" in lines.get(url, "") for url in urls)


def test_a_pod_cannot_bind_pods_through_the_extender(suite):
    profile = suite.profile
    if not profile.extender_selector:
        placement = "kube-scheduler places its claims" if profile.dra is not None else "it names no extender pods"
        suite.not_applicable("victim_unbound", f"stack {profile.name} has no scheduler extender to call ({placement})")
        return
    found = extender.extender_addresses(suite.kube, profile)
    if not found:
        pytest.skip(
            suite.not_judged(
                "victim_unbound",
                f"no running extender pod ({profile.extender_selector}) in {profile.stack_namespace} "
                "with an address (no Service selects it, no port declared)",
            )
        )
    urls = [url for url, _ in extender.extender_urls(found, profile.extender_prefix, "bind")]
    allure.attach(
        "\n".join(f"{a.hostport}: {a.source}" for a in found), "extender addresses", allure.attachment_type.TEXT
    )
    node = suite.node.node
    with allure.step("A share pod that no node can take waits, unbound"):
        victim = suite.submit_share_pod_on("gpushare-conformance-no-such-node", "victim", SHARE_GIB, None)
        suite.wait_unschedulable(victim)
        uid = suite.pod(victim)["metadata"]["uid"]
    with allure.step(f"A pod asking no GPU runs on {node}"):
        submit.create(suite.kube, suite.namespace, _no_gpu_pod(suite, "attacker"))
        suite.wait_running("attacker")
    body = {"PodName": victim, "PodNamespace": suite.namespace, "PodUID": uid, "Node": node}
    with allure.step(f"It posts a bind of the victim to {node} at every address of the extender: {', '.join(urls)}"):
        sent = suite.run_in_pod("attacker", ["python3", "-c", POST_BIND, json.dumps(body), *urls], "POST bind")
        answer = sent.stdout.strip() or sent.output.strip()[-600:]
        allure.attach(answer, "answers", allure.attachment_type.TEXT)
    with allure.step("The victim is still unbound"):
        time.sleep(2)  # a bind the extender accepted is on the pod by now
        bound_to = (suite.pod(victim).get("spec") or {}).get("nodeName")
    answered = ANSWERED.findall(sent.stdout)
    if bound_to is None and not answered and refused_everywhere(sent.stdout, urls):
        # Every address the API gives the extender refused the pod's connection: a pod
        # cannot reach its verbs at all (the reference stack listens on the node's loopback).
        suite.expect(
            v.equal("victim_unbound", None, bound_to, f"every address of the extender refused the pod: {answer[-300:]}")
        )
        return
    if bound_to is None and not answered:
        # Nothing answered: the extender was never reached, so its refusal is unknown.
        pytest.skip(
            suite.not_judged(
                "victim_unbound",
                f"no address of the extender answered a pod ({'; '.join(a.source for a in found)}): {answer[-300:]}",
            )
        )
    shown = "; ".join(f"{url} {code}" for url, code in answered)
    suite.expect(
        v.equal(
            "victim_unbound",
            None,
            bound_to,
            f"node of the victim after a pod asking no GPU posted its bind to the extender "
            f"(answers: {shown}; {answer[-300:]})",
        )
    )


def forged_allocation(annotations: dict[str, str]) -> dict[str, str]:
    """Another pod's allocation annotations, marked as not served yet and bound first, the
    way the stacks the suite knows mark it (gpushare's ASSIGNED=false and earliest
    ASSUME_TIME, HAMi's bind-phase=allocating): what a pod author would write to be
    served that pod's cards."""
    forged = dict(annotations)
    for key in annotations:
        if key.lower().endswith("assigned"):
            forged[key] = "false"
        if key.lower().endswith(("assume_time", "assume-time", "bind-time")):
            forged[key] = "1"
    if "hami.io/vgpu-devices-allocated" in annotations:
        forged["hami.io/bind-phase"] = "allocating"
        forged["hami.io/vgpu-devices-to-allocate"] = annotations["hami.io/vgpu-devices-allocated"]
    return forged


def test_a_pod_created_with_another_pods_allocation_gets_no_card(suite):
    with allure.step(f"A pod holds a {SHARE_GIB} GiB share"):
        holder = suite.submit_share_pod("holder", SHARE_GIB, None)
        held = suite.wait_running(holder)
    node = held["spec"]["nodeName"]
    copied = forged_allocation(held["metadata"].get("annotations") or {})
    forged = submit.share_pod(suite.profile, "forged", suite.suite_image, SHARE_GIB, None, submit.HOLD)
    forged["metadata"].setdefault("annotations", {}).update(copied)
    forged["spec"]["nodeName"] = node  # past the scheduler, straight to the kubelet
    if suite.profile.dra is not None:
        # Under DRA the allocation lives in the holder's claim: the pod names that claim.
        claims = dra.claim_names(suite.kube.pod(suite.namespace, holder))
        forged.pop(submit.COMPANIONS, None)
        forged["spec"]["resourceClaims"] = [{"name": CLAIM_REFERENCE, "resourceClaimName": claims[0]}]
        copied = {f"resourceClaimName: {claims[0]}": ""}
    with allure.step(f"Another pod is created on {node} with the holder's allocation annotations"):
        allure.attach(json.dumps(forged, indent=2), "forged pod", allure.attachment_type.JSON)
        try:
            submit.create(suite.kube, suite.namespace, forged)
        except submit.SubmitError as exc:
            said = re.search(r'"message":\s*"((?:[^"\\]|\\.)*)"', str(exc))
            reason = said.group(1) if said else str(exc)[-300:]
            suite.expect(v.none_of("forged_allocation_served", [], f"the API server refused the pod: {reason[:400]}"))
            return
    with allure.step("The node serves it no card"):
        state, _ = submit.wait_pod(
            suite.kube,
            suite.namespace,
            "forged",
            want=(podstate.RUNNING, podstate.FAILED, podstate.STUCK, podstate.SUCCEEDED),
            timeout=suite.timeouts.pod_start,
            progress=suite.progress,
        )
        cards: list[str] = []
        if state.kind == podstate.RUNNING:
            try:
                report = suite.nvidia_smi_exec("forged")
                cards = [f"card {i}: {mib} MiB" for i, mib in sorted(card_totals_mib(report).items())]
            except AssertionError as exc:  # running, but nvidia-smi finds no card
                state = podstate.PodState(state.kind, f"nvidia-smi: {str(exc)[:200]}")
            except ProgramMissing:  # no driver was given to it at all
                state = podstate.PodState(state.kind, "no nvidia-smi in it: the node gave it no driver")
        suite.expect(
            v.none_of(
                "forged_allocation_served",
                cards,
                f"cards of a pod created on {node} with {sorted(copied)} copied from {holder} "
                f"({state.kind}: {state.reason})",
            )
        )


# What CUDA shows a process: how many devices cuDeviceGetCount reports, if the driver
# library is there at all.
CUDA_DEVICE_COUNT = r"""
import ctypes
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    print("devices 0 (no libcuda.so.1: %s)" % exc)
    raise SystemExit(0)
count = ctypes.c_int(0)
status = cuda.cuInit(0)
if status == 0:
    status = cuda.cuDeviceGetCount(ctypes.byref(count))
print("devices %d (cuInit/cuDeviceGetCount status %d)" % (count.value if status == 0 else 0, status))
"""


def test_a_pod_asking_no_gpu_gets_no_card_by_naming_them_all(suite):
    node = suite.node.node
    pod = _no_gpu_pod(suite, "no-gpu", {names.ENV_VISIBLE: "all", "NVIDIA_DRIVER_CAPABILITIES": "all"})
    with allure.step(f"A pod on {node} that asks no GPU sets NVIDIA_VISIBLE_DEVICES=all"):
        allure.attach(json.dumps(pod, indent=2), "pod no-gpu spec", allure.attachment_type.JSON)
        submit.create(suite.kube, suite.namespace, pod)
        suite.wait_running("no-gpu")
    with allure.step("nvidia-smi and CUDA in it find no card"):
        seen: list[str] = []
        try:
            report = suite.nvidia_smi_exec("no-gpu")
            seen += [f"nvidia-smi card {i}: {mib} MiB" for i, mib in sorted(card_totals_mib(report).items())]
            smi = f"nvidia-smi shows {len(seen)} card(s)"
        except ProgramMissing:
            smi = "nvidia-smi: not in the container"
        except AssertionError as exc:  # nvidia-smi finds no card
            smi = f"nvidia-smi: {str(exc).splitlines()[0][:160]}"
        counted = suite.run_in_pod("no-gpu", ["python3", "-c", CUDA_DEVICE_COUNT], "CUDA device count")
        found = re.search(r"devices (\d+)(.*)", counted.stdout)
        if found is None:
            cuda = f"CUDA device count unreadable (exit {counted.exit_status}): {counted.output.strip()[-200:]}"
        else:
            cuda = f"CUDA: {found.group(0).strip()[:200]}"
            seen += [f"CUDA device {i}" for i in range(int(found.group(1)))]
        suite.expect(
            v.none_of(
                "no_gpu_pod_sees_no_card",
                seen,
                f"cards in a pod on {node} that asks no GPU and sets NVIDIA_VISIBLE_DEVICES=all ({smi}; {cuda})",
            )
        )


# GETs each URL (plain HTTP and HTTPS, no client certificate, the server's certificate
# not checked), one answer a line: the URL, the status or "unreachable", the body on
# one line.
GET_EACH = r"""
import ssl, sys, urllib.error, urllib.request
insecure = ssl.create_default_context()
insecure.check_hostname = False
insecure.verify_mode = ssl.CERT_NONE
for url in sys.argv[1:]:
    try:
        with urllib.request.urlopen(url, timeout=10, context=insecure) as reply:
            print(url, reply.status, " ".join(reply.read(20000).decode(errors="replace").split()))
    except urllib.error.HTTPError as exc:
        print(url, exc.code, " ".join(exc.read(2000).decode(errors="replace").split()))
    except Exception as exc:
        print(url, "unreachable", repr(exc)[:300])
"""


def test_a_pod_cannot_read_other_pods_from_the_extender(suite):
    """Which pods hold which cards is each tenant's own business: a pod asking no GPU
    reads every address of the extender (its inspect path, and the usual others) and
    must find no other pod named there."""
    profile = suite.profile
    check = "extender_names_no_pod"
    found = _extender_addresses(suite, check, "read")
    if found is None:
        return
    with allure.step(f"A pod holds a {SHARE_GIB} GiB share, so the extender has a pod to tell of"):
        neighbour = suite.submit_share_pod("neighbour", SHARE_GIB, None)
        suite.wait_running(neighbour)
    paths = {p for p in (profile.inspect_path, "/inspect", "/", "/metrics") if p}
    if profile.extender_prefix:
        paths.add(f"{profile.extender_prefix.rstrip('/')}/inspect")
    urls = sorted({url for path in paths for url, _ in extender.extender_urls(found, "", path.lstrip("/"))})
    with allure.step(f"A pod asking no GPU reads {len(urls)} URLs of the extender"):
        submit.create(suite.kube, suite.namespace, _no_gpu_pod(suite, "reader"))
        suite.wait_running("reader")
        read = suite.run_in_pod("reader", ["python3", "-c", GET_EACH, *urls], "GET the extender")
        allure.attach(read.output, "answers", allure.attachment_type.TEXT)
    answers = [line.split(" ", 2) for line in read.stdout.splitlines() if line.strip()]
    leaks = [f"{a[0]} {a[1]}" for a in answers if len(a) == 3 and a[1].isdigit() and suite.namespace in a[2]]
    codes = "; ".join(f"{a[0]} {a[1]}" for a in answers if len(a) >= 2 and a[1].isdigit())
    if not codes and not refused_everywhere(read.stdout, urls):
        pytest.skip(suite.not_judged(check, f"no address of the extender answered a pod: {read.output[-300:]}"))
    said = codes or "every address refused the pod's connection"
    detail = f"answers naming pod {suite.namespace}/{neighbour}: {', '.join(leaks) or 'none'} (of {said})"
    suite.expect(Verdict(check, "no answer names another pod", f"{len(leaks)} naming it", not leaks, detail))


# A pod holding connections open to every address of the extender: heads dribbled a
# byte at a time, bodies stopped half-way, heads of 60 KB, TLS handshakes never
# finished, requests pipelined whose answers it never reads, a byte more on each every
# few seconds; and, every few seconds, a fresh
# connection to each address that must be answered (any bytes, or a close) within
# PROBE_TIMEOUT_S, as the scheduler's next connection would be. Prints what it holds.
STALL = r"""
import socket, ssl, sys, time
hold_s, count = float(sys.argv[1]), int(sys.argv[2])
targets = [(h, int(p)) for h, p in (t.rsplit(":", 1) for t in sys.argv[3:])]
start = time.monotonic()
stamp = lambda: f"{time.monotonic() - start:5.1f}s"
firsts = [
    b"POST /filter HTTP/1.1\r\nHost: x\r\n",
    b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 60000,
    b"\x16\x03\x01",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 1000,  # answers it never reads
]
held, refused, cut = [], {}, 0
for i in range(count):
    target = targets[i % len(targets)]
    try:
        sock = socket.create_connection(target, timeout=2)
    except OSError as exc:
        refused[target] = repr(exc)[:120]
        continue
    sock.settimeout(2)
    try:
        sock.sendall(firsts[i % len(firsts)])
    except OSError:
        cut += 1  # the server answered or closed it already
        sock.close()
        continue
    held.append(sock)
print(stamp(), "held", len(held), "of", count, "connections to", len(targets), "addresses;", cut, "cut at once;",
      "refused:", "; ".join(f"{h}:{p} {why}" for (h, p), why in refused.items()) or "none", flush=True)
PROBE = 5.0
insecure = ssl.create_default_context()
insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
def probe(target):
    try:
        sock = socket.create_connection(target, timeout=PROBE)
    except OSError as exc:
        return "refused " + repr(exc)[:80]
    sock.settimeout(PROBE)
    try:
        try:
            insecure.wrap_socket(sock).close()
            return "answered (TLS handshake)"
        except ssl.SSLError as exc:
            return "answered (" + repr(exc)[:60] + ")"
    except socket.timeout:
        return "no answer in %gs" % PROBE
    except OSError as exc:
        return "answered (closed: " + repr(exc)[:60] + ")"
    finally:
        sock.close()
while time.monotonic() - start < hold_s:
    for target in targets:
        if target not in refused:
            print(stamp(), "probe", "%s:%d" % target, probe(target), flush=True)
    still = 0
    for sock in held:
        try:
            sock.send(b"a")
            still += 1
        except OSError:
            pass
    print(stamp(), "still open", still, "of", len(held), flush=True)
    time.sleep(3)
"""
STALL_CONNECTIONS = 300  # past the thread or connection pools of common servers
STALL_HOLD_S = 75
# A share pod submitted during the attack must be running by then: room for a loaded
# machine (10.3 s seen beside three clusters on two cores), and well short of the hold
# (a stalled extender places the pod only once the hold ends, a minute after it came).
STALL_BOUND_S = 45.0


def test_a_pod_holding_connections_open_cannot_stall_the_extender(suite):
    """The scheduler's extender keeps answering while a pod holds hundreds of slow and
    oversized connections open to every address of it: a share pod submitted meanwhile
    runs, fresh connections to each address are answered, and the extender is not
    restarted (a memory limit exceeded, a liveness probe unanswered)."""
    check = "extender_answers_while_held"
    found = _extender_addresses(suite, check, "hold")
    if found is None:
        return
    targets = sorted({a.hostport for a in found})
    restarts = _extender_restarts(suite)
    with allure.step(f"A pod asking no GPU holds {STALL_CONNECTIONS} connections open to {', '.join(targets)}"):
        attacker = _no_gpu_pod(suite, "holder")
        attacker["spec"]["containers"][0]["command"] = [
            "python3",
            "-c",
            STALL,
            str(STALL_HOLD_S),
            str(STALL_CONNECTIONS),
            *targets,
        ]
        submit.create(suite.kube, suite.namespace, attacker)
        suite.wait_running("holder")
        evidence.wait_for_log(
            suite.kube, suite.namespace, "holder", lambda text: " held " in text, timeout=60, what="connections held"
        )
    with allure.step(f"A {SHARE_GIB} GiB share pod is submitted while they are held"):
        started = time.monotonic()
        pod = suite.submit_share_pod("while-held", SHARE_GIB, None)
        try:
            suite.wait_running(pod)
            running_s: float | None = time.monotonic() - started
        except Exception as exc:  # never running: the figure says so
            running_s = None
            allure.attach(repr(exc)[:2000], "share pod", allure.attachment_type.TEXT)
    log = evidence.wait_for_log(
        suite.kube, suite.namespace, "holder", lambda text: " still open " in text, timeout=60, what="a probe round"
    )
    allure.attach(log, "what the holding pod saw", allure.attachment_type.TEXT)
    after = _extender_restarts(suite)
    held = re.search(r" held (\d+) of (\d+) .*refused: (.*)", log)
    probes = re.findall(r" probe (\S+) (.*)", log)
    silent = [f"{target} {said}" for target, said in probes if said.startswith("no answer")]
    answered = sum(1 for _, said in probes if said.startswith("answered"))
    restarted = {name: after.get(name, 0) - count for name, count in restarts.items() if after.get(name, 0) > count}
    ran = f"running in {running_s:.1f} s" if running_s is not None else "never running"
    actual = (
        f"share pod {ran}; fresh connections answered {answered} of {answered + len(silent)}"
        f"{' (' + '; '.join(silent[:3]) + ')' if silent else ''}; extender restarts {sum(restarted.values())}"
    )
    detail = (
        f"a pod held {held.group(1) if held else '?'} of {STALL_CONNECTIONS} connections "
        f"(refused: {held.group(3)[:200] if held else '?'}) to {', '.join(targets)}: {actual}"
    )
    passed = running_s is not None and running_s <= STALL_BOUND_S and not silent and not restarted
    suite.expect(
        Verdict(
            check,
            f"share pod running within {STALL_BOUND_S:g} s, every fresh connection answered, no restart",
            actual,
            passed,
            detail,
        )
    )


def _extender_addresses(suite, check: str, what: str) -> list[extender.ExtenderAddress] | None:
    """Where a pod may reach the stack's extender; None once ``check`` is N/A (the stack
    has no extender). Skipped, not judged, when no extender pod has an address."""
    profile = suite.profile
    if not profile.extender_selector:
        suite.not_applicable(check, f"stack {profile.name} has no scheduler extender to {what}")
        return None
    found = extender.extender_addresses(suite.kube, profile)
    if not found:
        pytest.skip(suite.not_judged(check, f"no running extender pod ({profile.extender_selector}) with an address"))
    return found


def _extender_restarts(suite) -> dict[str, int]:
    """Container restarts of each extender pod, by pod name."""
    return {
        p["metadata"]["name"]: sum(
            c.get("restartCount", 0) for c in (p.get("status") or {}).get("containerStatuses") or []
        )
        for p in extender.extender_pods(suite.kube, suite.profile)
    }
