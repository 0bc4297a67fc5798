"""--version and --log-level of the commands; the stack's binaries with an unusable kubeconfig."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest

from gpushare_conformance import cli
from gpushare_conformance.commands import run

VERSION = version("gpushare-conformance")
BINARIES = {
    "gpushare-conformance": "gpushare_conformance.cli",
    "gpushare-extender": "gpushare_stack.extender",
    "gpushare-device-plugin": "gpushare_stack.deviceplugin",
    "gpushare-dra-plugin": "gpushare_stack.dra",
}


def _main(module: str, *args: str) -> subprocess.CompletedProcess:
    code = f"import sys, runpy; sys.argv = ['x', *sys.argv[1:]]; runpy.run_module({module!r}, run_name='__main__')"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("name", BINARIES)
def test_every_command_says_the_package_version(name):
    result = _main(BINARIES[name], "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(VERSION)


def test_log_level_applies_to_the_command_and_is_passed_to_the_run():
    args = cli.build_parser().parse_args(["--log-level", "debug", "run", "--cluster", "existing"])
    assert args.log_level == "DEBUG"
    argv = run.pytest_argv(args)
    assert argv[argv.index("--log-level") + 1] == "DEBUG"
    plain = cli.build_parser().parse_args(["run"])
    assert "--log-level" not in run.pytest_argv(plain)
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["--log-level", "loud", "run"])


def test_run_passes_another_dra_drivers_spelling_to_the_checks():
    args = cli.build_parser().parse_args(
        [
            "run",
            "--cluster",
            "existing",
            "--stack",
            "dra",
            "--dra-device-class",
            "gpu.nvidia.com",
            "--dra-driver",
            "gpu.nvidia.com",
        ]
    )
    argv = run.pytest_argv(args)
    assert argv[argv.index("--gpushare-dra-device-class") + 1] == "gpu.nvidia.com"
    assert argv[argv.index("--gpushare-dra-driver") + 1] == "gpu.nvidia.com"
    assert "--gpushare-dra-capacity" not in argv


@pytest.mark.parametrize("name", ["gpushare-extender", "gpushare-device-plugin", "gpushare-dra-plugin"])
@pytest.mark.parametrize("content", ["", None, "\xff\xfe not yaml"], ids=["empty", "missing", "garbage"])
def test_a_stack_binary_with_an_unusable_kubeconfig_says_so_in_one_line(tmp_path, name, content):
    kubeconfig = tmp_path / "kubeconfig"
    if content is not None:
        kubeconfig.write_bytes(content.encode("latin-1"))
    if name in ("gpushare-device-plugin", "gpushare-dra-plugin"):
        result = _main(BINARIES[name], "--kubeconfig", str(kubeconfig), "--node-name", "n")
    else:
        result = _main(BINARIES[name], "--kubeconfig", str(kubeconfig), "--port", "0")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith(f"{name}: error: --kubeconfig {kubeconfig} cannot be used: "), result.stderr
    assert "Traceback" not in result.stderr and "ConfigException" not in result.stderr


def test_the_device_plugin_refuses_a_nan_health_interval(capsys):
    from gpushare_stack.deviceplugin.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(["--node-name", "n", "--health-interval", "nan"])
    assert exit_.value.code == 2 and "--health-interval must be > 0, got nan" in capsys.readouterr().err
