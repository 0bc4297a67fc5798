"""The stack's entry points document every option and refuse bad input by name."""

from __future__ import annotations

import pytest

from gpushare_stack.deviceplugin import __main__ as plugin_main
from gpushare_stack.dra import __main__ as dra_main
from gpushare_stack.extender import __main__ as extender_main


@pytest.mark.parametrize("parser", [plugin_main.build_parser(), extender_main.build_parser(), dra_main.build_parser()])
def test_every_option_has_help(parser):
    for action in parser._actions:
        assert action.help, f"{action.option_strings} has no help"


def test_device_plugin_needs_a_node_name(monkeypatch, capsys):
    monkeypatch.delenv("NODE_NAME", raising=False)
    with pytest.raises(SystemExit) as info:
        plugin_main.main(["--health-interval", "5"])
    assert info.value.code == 2
    assert "--node-name is required (or set env NODE_NAME" in capsys.readouterr().err


def test_device_plugin_has_no_mock_mode(capsys):
    """Mock and real nodes run the same device plugin: the node's container toolkit
    provides the (mock) driver, so there is no option to mount one."""
    assert not [a.option_strings for a in plugin_main.build_parser()._actions if "mock" in " ".join(a.option_strings)]
    with pytest.raises(SystemExit):
        plugin_main.main(["--node-name", "n", "--mock-inventory", "/etc/gpushare/inventory.yaml"])
    assert "unrecognized arguments: --mock-inventory" in capsys.readouterr().err


def test_extender_refuses_unknown_policy(capsys):
    with pytest.raises(SystemExit):
        extender_main.build_parser().parse_args(["--policy", "random"])
    assert "invalid choice: 'random'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--publish-interval", "5"], "--node-name is required (or set env NODE_NAME"),
        (["--node-name", "n", "--publish-interval", "0"], "--publish-interval must be > 0, got 0.0"),
        (
            ["--node-name", "n", "--kubeconfig", "/nonexistent/kubeconfig"],
            "--kubeconfig /nonexistent/kubeconfig cannot be used",
        ),
    ],
)
def test_dra_plugin_names_what_is_wrong(monkeypatch, capsys, argv, says):
    monkeypatch.delenv("NODE_NAME", raising=False)
    with pytest.raises(SystemExit) as info:
        dra_main.main(argv)
    assert info.value.code == 2
    assert says in capsys.readouterr().err
