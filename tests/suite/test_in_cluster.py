"""The suite as a conformance image, without a cluster: the focus/skip mapping, the
contract's command line, the log hydrophone reads, the in-cluster kubeconfig."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from gpushare_conformance.fixtures.options import OptionError, SuiteOptions
from gpushare_conformance.fixtures.providers.existing import ExistingClusterError
from gpushare_conformance.fixtures.providers.incluster import incluster_kubeconfig
from gpushare_conformance.fixtures.selection import SelectionError, compile_pattern, selected, spec_text, split_items
from gpushare_conformance.suiteimage import run as entry
from gpushare_conformance.suiteimage.contract import ContractError, pytest_argv

SEED = spec_text("test_seed.py::test_seed_job_gets_4gib_on_each_of_2_cards", ["e2e", "seed", "capacity"])
ADVERTISING = spec_text("test_isolation.py::test_node_advertising_matches_nvml_inventory", ["e2e", "isolation"])


def _runs(focus: str | None, skip: str | None, text: str) -> bool:
    return selected(text, compile_pattern("--gpushare-focus", focus), compile_pattern("--gpushare-skip", skip))


@pytest.mark.parametrize(
    ("focus", "skip", "seed", "advertising"),
    [
        (None, None, True, True),
        (r"\[Conformance\]", None, True, True),  # hydrophone's default focus: every check
        ("test_seed_job", None, True, False),
        (r"\[isolation\]", None, False, True),
        ("test_seed_job|advertising", r"\[isolation\]", True, False),
        (None, "test_seed.py", False, True),
        ("nothing-matches", None, False, False),
    ],
)
def test_focus_and_skip_choose_checks_as_ginkgo_does(focus, skip, seed, advertising):
    assert (_runs(focus, skip, SEED), _runs(focus, skip, ADVERTISING)) == (seed, advertising)


def test_a_focus_that_is_not_a_regex_names_the_option_and_value():
    with pytest.raises(SelectionError, match=r"--gpushare-skip: not a regular expression: '\[seed'"):
        compile_pattern("--gpushare-skip", "[seed")


class _Item:
    """What the selection reads of a pytest item: its node id and its markers' names."""

    def __init__(self, nodeid: str, *markers: str) -> None:
        self.nodeid, self.markers = nodeid, markers

    def iter_markers(self):
        return (type("Marker", (), {"name": m})() for m in self.markers)


def test_split_items_keeps_what_the_focus_names_and_the_skip_leaves():
    seed = _Item("conformance/test_seed.py::test_seed_job_gets_4gib_on_each_of_2_cards", "e2e", "seed")
    smi = _Item("conformance/test_isolation.py::test_node_advertising_matches_nvml_inventory", "e2e", "isolation")
    assert split_items([seed, smi], r"\[e2e\]", r"\[isolation\]") == ([seed], [smi])
    assert split_items([seed, smi], None, None) == ([seed, smi], [])
    with pytest.raises(SelectionError, match=r"--gpushare-focus: not a regular expression: '\('"):
        split_items([seed], "(", None)


def test_the_environment_becomes_the_pytest_command_line(tmp_path):
    env = {
        "E2E_FOCUS": r"\[seed\]",
        "E2E_SKIP": "burst",
        "E2E_EXTRA_ARGS": "--gpushare-mock-nvml --gpushare-wait-timeout 60",
        "E2E_EXTRA_GINKGO_ARGS": "--procs=3 -v --flake-attempts=2",
        "E2E_PROVIDER": "skeleton",
    }
    argv = pytest_argv(env, tmp_path / "results", tmp_path / "work")
    text = " ".join(argv)
    assert "--gpushare-cluster in-cluster" in text
    assert f"--junitxml {tmp_path / 'results' / 'junit_01.xml'}" in text
    assert r"--gpushare-focus \[seed\] --gpushare-skip burst -n 3 -v" in text
    assert argv[-3:] == ["--gpushare-mock-nvml", "--gpushare-wait-timeout", "60"]
    assert "--collect-only" not in argv and "--flake-attempts=2" not in argv
    assert "--collect-only" in pytest_argv({"E2E_DRYRUN": "true"}, tmp_path, tmp_path)
    assert "--gpushare-focus" not in pytest_argv({"E2E_FOCUS": ""}, tmp_path, tmp_path)


def test_a_switch_comes_as_hydrophone_spells_it(tmp_path):
    argv = pytest_argv({"E2E_EXTRA_ARGS": "--gpushare-mock-nvml=true --gpushare-stack=hami"}, tmp_path, tmp_path)
    assert argv[-2:] == ["--gpushare-mock-nvml", "--gpushare-stack=hami"]
    with pytest.raises(ContractError, match="'--gpushare-mock-nvml=false': the suite's switches are turned on"):
        pytest_argv({"E2E_EXTRA_ARGS": "--gpushare-mock-nvml=false"}, tmp_path, tmp_path)


def test_extra_args_that_cannot_be_split_name_the_variable(tmp_path):
    with pytest.raises(ContractError, match="E2E_EXTRA_ARGS: cannot split '--x \"open'"):
        pytest_argv({"E2E_EXTRA_ARGS": '--x "open'}, tmp_path, tmp_path)


def test_the_log_starts_with_will_run_and_ends_with_the_line_hydrophone_waits_for(tmp_path, monkeypatch):
    script = "print('session header'); print('Will run 1 of 4 specs'); print('\\u2022 t.py::a'); raise SystemExit(3)"
    monkeypatch.setattr(entry, "pytest_argv", lambda env, results, work: [sys.executable, "-c", script])
    monkeypatch.setenv("RESULTS_DIR", str(tmp_path))
    assert entry.main() == 3, "the exit status is pytest's"
    lines = (tmp_path / "e2e.log").read_text().splitlines()
    assert lines[:3] == ["Will run 1 of 4 specs", "session header", "\u2022 t.py::a"]
    assert lines[-1].startswith("Ginkgo ran 1 suite in ") and lines[-1].endswith("pytest exit 3)")


def test_the_progress_plugin_counts_the_chosen_and_the_finished(tmp_path):
    (tmp_path / "test_x.py").write_text(
        textwrap.dedent(
            """
            import pytest

            @pytest.mark.seed
            def test_a():
                pass

            def test_b():
                pass

            def test_c():
                pass
            """
        )
    )
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "gpushare_conformance.suiteimage.progress"]
    argv += ["--rootdir", str(tmp_path), "--gpushare-focus", r"\[seed\]|test_b", "--gpushare-skip", "test_b"]
    result = subprocess.run([*argv, str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Will run 1 of 3 specs" in result.stdout
    assert [line for line in result.stdout.splitlines() if line.startswith("\u2022")] == ["\u2022 test_x.py::test_a"]


def _account(tmp_path: Path) -> Path:
    account = tmp_path / "sa"
    account.mkdir()
    for name, text in (("token", "t0ken"), ("ca.crt", "PEM"), ("namespace", "conformance\n")):
        (account / name).write_text(text)
    return account


def test_the_in_cluster_kubeconfig_reads_the_token_file(tmp_path):
    account = _account(tmp_path)
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    config = yaml.safe_load(incluster_kubeconfig(tmp_path / "out", env, account).read_text())
    assert config["clusters"][0]["cluster"] == {
        "server": "https://10.96.0.1:443",
        "certificate-authority": str(account / "ca.crt"),
    }
    assert config["users"][0]["user"] == {"tokenFile": str(account / "token")}  # kubelet rotates it
    assert config["contexts"][0]["context"]["namespace"] == "conformance"
    env6 = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    config6 = yaml.safe_load(incluster_kubeconfig(tmp_path / "out6", env6, account).read_text())
    assert config6["clusters"][0]["cluster"]["server"] == "https://[fd00::1]:443"


def test_outside_a_pod_the_error_says_what_is_missing(tmp_path):
    with pytest.raises(ExistingClusterError, match="KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are not set"):
        incluster_kubeconfig(tmp_path, {}, _account(tmp_path))
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(ExistingClusterError, match=f"{tmp_path / 'none' / 'token'} not found"):
        incluster_kubeconfig(tmp_path, env, tmp_path / "none")


def test_in_cluster_options_behave_like_existing():
    options = SuiteOptions.from_values({"gpushare_cluster": "in-cluster"})
    assert options.mocked_nvml is False
    assert options.provider_options() == {"kubectl_binary": None, "mocked_nvml": False}
    with pytest.raises(OptionError, match="--gpushare-context='c' does not apply to --gpushare-cluster in-cluster"):
        SuiteOptions.from_values({"gpushare_cluster": "in-cluster", "gpushare_context": "c"})
    with pytest.raises(OptionError, match="--gpushare-kubernetes-version='1.36' only applies"):
        SuiteOptions.from_values({"gpushare_cluster": "in-cluster", "gpushare_kubernetes_version": "1.36"})


def test_the_suite_image_carries_every_dependency_of_the_suite():
    import tomllib

    from gpushare_conformance.images.build import IMAGE_REQUIREMENTS, REPO
    from gpushare_conformance.images.suite import SUITE_REQUIREMENTS

    def names(requirements):
        return {r.split(">")[0].split("=")[0].split("<")[0].strip().lower() for r in requirements}

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert names(declared) <= names(IMAGE_REQUIREMENTS) | names(SUITE_REQUIREMENTS)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpushare_conformance", *args], capture_output=True, text=True, timeout=60
    )


def test_rbac_print_is_the_documented_manifest():
    from gpushare_conformance.commands.rbac import RBAC_MANIFEST

    printed = _cli("rbac", "--print")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == RBAC_MANIFEST.read_text()
    docs = {d["kind"]: d for d in yaml.safe_load_all(printed.stdout)}
    assert set(docs) == {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
    subject = docs["ClusterRoleBinding"]["subjects"][0]
    assert (subject["name"], subject["namespace"]) == (
        docs["ServiceAccount"]["metadata"]["name"],
        "gpushare-conformance",
    )
    exec_rule = [r for r in docs["ClusterRole"]["rules"] if "pods/exec" in r["resources"]]
    assert exec_rule and "create" in exec_rule[0]["verbs"]


def test_rbac_apply_names_a_missing_kubectl():
    result = _cli("rbac", "--apply", "--kubectl", "/nonexistent/kubectl")
    assert result.returncode == 2
    assert "--kubectl: '/nonexistent/kubectl' is neither an existing file nor a program on PATH" in result.stderr
