"""Option validation: bad values and combinations fail at start-up, naming the option."""

import subprocess
import sys

import pytest

from gpushare_conformance.fixtures.options import OptionError, SuiteOptions


def opts(**values):
    return SuiteOptions.from_values(values)


def test_defaults_are_local_reference_mocked():
    o = opts()
    assert (o.cluster, o.stack, o.mocked_nvml, o.wait_timeout) == ("local", "reference", True, 180.0)
    assert o.provider_options() == {"inventory": None, "keep": False, "kubernetes_version": None}


def test_a_kind_cluster_name_reaches_the_kind_provider():
    assert opts(gpushare_cluster="kind", gpushare_kind_cluster="faults").provider_options()["cluster_name"] == "faults"
    assert "cluster_name" not in opts(gpushare_cluster="kind").provider_options(), "the provider's default name"


def test_the_dra_options_spell_another_drivers_claims():
    assert opts(gpushare_stack="dra").profile.dra.device_class == "gpu.gpushare.conformance.io"
    nvidia = opts(
        gpushare_cluster="existing",
        gpushare_stack="dra",
        gpushare_dra_device_class="gpu.nvidia.com",
        gpushare_dra_driver="gpu.nvidia.com",
    ).profile
    assert nvidia.name == "dra" and nvidia.dra.distinct_attribute == "gpu.nvidia.com/uuid"
    exactly = nvidia.pod_request(8, 2).claim_template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["deviceClassName"] == "gpu.nvidia.com" and exactly["capacity"]["requests"] == {"memory": "4Gi"}


def test_existing_defaults_to_real_gpus():
    assert opts(gpushare_cluster="existing").mocked_nvml is False


@pytest.mark.parametrize(
    "values, message",
    [
        ({"gpushare_cluster": "minikube"}, r"--gpushare-cluster: unknown cluster 'minikube'"),
        ({"gpushare_stack": "volcano"}, r"--gpushare-stack: unknown stack profile 'volcano'"),
        ({"gpushare_context": "prod"}, r"--gpushare-context='prod' only applies"),
        ({"gpushare_kubeconfig": "/tmp/x"}, r"--gpushare-cluster-kubeconfig only applies"),
        (
            {"gpushare_cluster": "existing", "gpushare_kubeconfig": "/nonexistent/kubeconfig"},
            r"--gpushare-cluster-kubeconfig: file not found",
        ),
        ({"gpushare_timeouts": ["pod_start"]}, r"--gpushare-timeout 'pod_start': expected NAME=SECONDS"),
        ({"gpushare_timeouts": ["pod_begin=3"]}, r"--gpushare-timeout: unknown time-out 'pod_begin'"),
        ({"gpushare_timeouts": ["pod_start=soon"]}, r"--gpushare-timeout 'pod_start=soon': 'soon' is not a number"),
        ({"gpushare_timeouts": ["pod_start=-1"]}, r"--gpushare-timeout pod_start=-1.0: must be a positive"),
        ({"gpushare_mocked_nvml": False}, r"--gpushare-real-gpu: the local provider has no GPUs"),
        ({"gpushare_wait_timeout": "soon"}, r"--gpushare-wait-timeout: expected seconds"),
        ({"gpushare_wait_timeout": 0}, r"--gpushare-wait-timeout: must be positive"),
        (
            {"gpushare_cluster": "kind", "gpushare_kind_binary": "/nonexistent/kind"},
            r"--gpushare-kind-binary: '/nonexistent/kind'",
        ),
        ({"gpushare_kind_binary": "sh"}, r"--gpushare-kind-binary only applies to --gpushare-cluster kind"),
        (
            {"gpushare_kind_cluster": "faults"},
            r"--gpushare-kind-cluster='faults' only applies to --gpushare-cluster kind",
        ),
        (
            {"gpushare_cluster": "kind", "gpushare_kind_cluster": "Faults_1"},
            r"--gpushare-kind-cluster='Faults_1': a kind cluster name is lower-case letters",
        ),
        ({"gpushare_mock_inventory": "/nonexistent.yaml"}, r"--gpushare-mock-inventory: file not found"),
        (
            {"gpushare_dra_capacity": "memory"},
            r"--gpushare-dra-capacity='memory': applies to --gpushare-stack dra only, got --gpushare-stack reference",
        ),
        (
            {"gpushare_stack": "dra", "gpushare_dra_attribute": "uuid"},
            r"--gpushare-dra-attribute: expected an attribute as <domain>/<name> \(e.g. gpu.nvidia.com/uuid\), got 'uuid'",
        ),
        (
            {"gpushare_stack": "dra", "gpushare_dra_capacity": " "},
            r"--gpushare-dra-capacity: expected a capacity name \(e.g. memory\), got ' '",
        ),
        (
            {"gpushare_stack": "dra", "gpushare_dra_attribute": "capacity"},
            r"--gpushare-dra-attribute: expected an attribute as <domain>/<name>.*got 'capacity'",
        ),
        (
            {"gpushare_stack": "dra", "gpushare_dra_driver": ""},
            r"--gpushare-dra-driver: expected a driver name.*got ''",
        ),
        (
            {"gpushare_stack": "dra", "gpushare_dra_device_class": "Bad Class!"},
            r"--gpushare-dra-device-class: expected a DeviceClass name.*got 'Bad Class!'",
        ),
    ],
)
def test_bad_options_name_the_option(values, message):
    with pytest.raises(OptionError, match=message):
        opts(**values)


def _pytest(*args):
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], capture_output=True, text=True, timeout=120
    )


SUITE_OPTIONS = (
    "--gpushare-cluster",
    "--gpushare-cluster-kubeconfig",
    "--gpushare-context",
    "--gpushare-deploy-stack",
    "--gpushare-stack",
    "--gpushare-keep-cluster-up",
    "--gpushare-keep-namespaces",
    "--gpushare-kind-binary",
    "--gpushare-kind-cluster",
    "--gpushare-kubectl-binary",
    "--gpushare-report-dir",
    "--gpushare-mock-nvml",
    "--gpushare-real-gpu",
    "--gpushare-mock-inventory",
    "--gpushare-kubernetes-version",
    "--gpushare-image-registry",
    "--gpushare-focus",
    "--gpushare-skip",
    "--gpushare-wait-timeout",
    "--gpushare-timeout",
    "--gpushare-verdict-summary",
    "--gpushare-dra-device-class",
    "--gpushare-dra-capacity",
    "--gpushare-dra-attribute",
    "--gpushare-dra-driver",
)


class _Recorder:
    """Stands in for pytest's parser and its groups: records every option and ini name."""

    def __init__(self) -> None:
        self.options: list[str] = []
        self.ini: list[str] = []

    def getgroup(self, *args, **kwargs):
        return self

    def addoption(self, *names, **kwargs):
        self.options += names

    def addini(self, name, *args, **kwargs):
        self.ini.append(name)


def test_every_option_of_the_plugin_carries_the_suite_prefix():
    # A plain name (``--timeout``, ``--cluster``) can clash with another installed plugin's
    # and break every pytest run of the environment (pytest-timeout's ``--timeout`` did).
    from gpushare_conformance.fixtures import plugin, reporting

    parser = _Recorder()
    plugin.pytest_addoption(parser)
    reporting.pytest_addoption(parser)
    assert sorted(parser.options) == sorted(SUITE_OPTIONS)
    assert all(name.startswith("--gpushare-") for name in parser.options), parser.options
    assert all(name.startswith("gpushare_") for name in parser.ini), parser.ini


def test_pytest_help_lists_the_suite_options():
    out = _pytest("--help").stdout
    for option in SUITE_OPTIONS:
        assert option in out, option


def test_pytest_markers_lists_the_suite_markers():
    out = _pytest("--markers").stdout
    for marker in ("e2e", "seed", "grid", "isolation", "restrictions", "lifecycle", "disruptive", "limitation", "gpu"):
        assert f"@pytest.mark.{marker}:" in out, marker


def test_bad_option_on_the_command_line_is_a_usage_error(tmp_path):
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    result = _pytest(str(tmp_path), "--gpushare-wait-timeout", "-5", "--rootdir", str(tmp_path))
    assert result.returncode == 4
    assert "--gpushare-wait-timeout: must be positive" in result.stderr


def test_gpu_checks_are_skipped_with_a_reason_when_nvml_is_mocked(tmp_path):
    # Only the suite's own cluster checks are skipped: an unrelated test marked gpu runs.
    (tmp_path / "test_x.py").write_text(
        "import pytest\n\n@pytest.mark.gpu\ndef test_needs_gpu(cluster):\n    raise AssertionError('ran')\n\n"
        "@pytest.mark.gpu\ndef test_someone_elses_gpu_test():\n    pass\n"
    )
    result = _pytest(str(tmp_path), "-rs", "--rootdir", str(tmp_path))
    assert result.returncode == 0, result.stdout
    assert "1 passed, 1 skipped" in result.stdout
    assert "needs real GPU hardware, but NVML is mocked" in result.stdout


def test_unit_tests_do_not_start_a_cluster(tmp_path):
    # A test that asks for no cluster fixture passes even with a provider that cannot start.
    (tmp_path / "test_x.py").write_text("def test_plain():\n    pass\n")
    result = _pytest(str(tmp_path), "--gpushare-cluster", "existing", "--rootdir", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_named_timeouts_override_one_at_a_time():
    o = opts(gpushare_timeouts=["pod_start=300", "settle=1.5"])
    assert (o.timeouts.pod_start, o.timeouts.settle, o.timeouts.exec) == (300.0, 1.5, 60.0)


def test_wait_timeout_sets_the_pod_waits_and_a_named_timeout_still_wins():
    o = opts(gpushare_wait_timeout=30, gpushare_timeouts=["log=99"])
    assert (o.timeouts.pod_start, o.timeouts.stack_ready, o.timeouts.log) == (30.0, 30.0, 99.0)
