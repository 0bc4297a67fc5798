"""The options table: declared through any ``addoption``-like call (here argparse's, no
pytest), read back by dest, and turned into ``SuiteOptions`` as the plugin does."""

from __future__ import annotations

import argparse

import pytest

from gpushare_conformance.fixtures.options import OPTIONS, OptionError, SuiteOptions, add_options, option_values


def _parse(*argv: str) -> SuiteOptions:
    parser = argparse.ArgumentParser()
    add_options(parser.add_argument)
    return SuiteOptions.from_values(option_values(vars(parser.parse_args(list(argv))).get))


def test_every_flag_is_the_suites_and_declared_once():
    flags = [o.flag for o in OPTIONS]
    assert len(flags) == len(set(flags)) and all(f.startswith("--gpushare-") for f in flags)
    assert all(o.dest.startswith("gpushare_") for o in OPTIONS)


def test_the_defaults_read_back_as_the_suites_defaults():
    assert _parse() == SuiteOptions.from_values({})


def test_flags_parse_into_the_options_they_name(tmp_path):
    o = _parse(
        "--gpushare-stack",
        "dra",
        "--gpushare-dra-driver",
        "gpu.nvidia.com",
        "--gpushare-keep-namespaces",
        "--gpushare-timeout",
        "pod_start=5",
        "--gpushare-timeout",
        "exec=7",
        "--gpushare-report-dir",
        str(tmp_path),
    )
    assert (o.stack, o.keep_namespaces, o.report_dir) == ("dra", True, tmp_path)
    assert (o.timeouts.pod_start, o.timeouts.exec) == (5.0, 7.0)
    assert o.dra_spelling is not None and o.dra_spelling.distinct_attribute == "gpu.nvidia.com/uuid"


def test_the_mock_and_real_gpu_flags_share_one_dest():
    assert _parse("--gpushare-cluster", "existing").mocked_nvml is False
    assert _parse("--gpushare-cluster", "existing", "--gpushare-mock-nvml").mocked_nvml is True
    with pytest.raises(OptionError, match="--gpushare-real-gpu"):
        _parse("--gpushare-real-gpu")


def test_one_more_row_is_one_more_option():
    from gpushare_conformance.fixtures.options import Option

    parser = argparse.ArgumentParser()
    extra = (*OPTIONS, Option("--gpushare-extra", "gpushare_extra", dict(default="x", help="an added option")))
    add_options(parser.add_argument, extra)
    values = option_values(vars(parser.parse_args(["--gpushare-extra", "y"])).get, extra)
    assert values["gpushare_extra"] == "y" and values["gpushare_cluster"] == "local"
