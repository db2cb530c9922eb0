"""One tool registry and one metric vocabulary: every list of tools and every metric table is
read from them, and they agree with the parser and adapter modules they name."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from runners import metrics, registry
from runners.parsers import PARSER_MODULES, get_parser
from runners.parsers.base import METRIC_UNITS
from runners.tools import ADAPTERS, TOOL_MODULES


def test_names_are_unique_lowercase_and_fit_the_model_field():
    names = registry.names()
    assert len(names) == len(set(names))
    assert registry.OTHER in names
    assert all(len(n) <= registry.MAX_NAME and n == n.lower() for n in names)


@pytest.mark.parametrize("spec", registry.parsed(), ids=lambda t: t.name)
def test_each_parser_module_is_the_tools_own(spec):
    module = importlib.import_module(spec.parser)
    assert module.TOOL == spec.name
    assert callable(module.detect) and callable(module.parse)
    assert get_parser(spec.name) is module


@pytest.mark.parametrize("spec", registry.runnable(), ids=lambda t: t.name)
def test_each_adapter_is_the_tools_own_and_reads_modes_and_version_from_the_registry(spec):
    adapter = importlib.import_module(spec.adapter).ADAPTER
    assert adapter.tool == spec.name
    assert ADAPTERS[spec.name] is adapter
    assert adapter.modes == spec.modes and "single" in spec.modes
    assert adapter.version_argv() == (list(spec.version) if spec.version else None)
    if spec.version:
        assert spec.version[0] == adapter.binary
    assert spec.parser, "a tool beeweb runs is a tool whose output it reads"


def test_derived_lists():
    assert TOOL_MODULES == [t.name for t in registry.runnable()]
    assert PARSER_MODULES == [t.name for t in registry.parsed()] + ["beegfs"]
    assert [t.name for t in registry.TOOLS if t.adapter is None] == ["io500", "perftest", "other"]
    assert registry.get("perftest").launch_modes == (registry.IMPORT_ONLY,)
    assert registry.on_servers() == {"storagebench"}
    assert "fio" in registry.packages() and "perftest" not in registry.packages()


def test_default_metrics_are_in_the_vocabulary():
    for spec in registry.TOOLS:
        assert all(m in metrics.UNITS for m in spec.metrics), spec.name
    assert registry.default_metric("mdtest") == "file_create"
    assert registry.default_metric("qperf") == "tcp_bw"
    assert registry.default_metric("other") == "write_bw"
    assert registry.default_metric("no-such-tool") == "write_bw"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "Fio"}, "lowercase identifier"),
        ({"name": "a" * 17}, "at most 16"),
        ({"metrics": ("write_speed",)}, "outside the vocabulary"),
        ({"modes": ("ssh",), "adapter": "x"}, "unknown launch modes"),
        ({"adapter": "runners.tools.x"}, "an adapter needs launch modes"),
    ],
)
def test_a_bad_entry_is_refused_at_import(fields, message):
    with pytest.raises(ValueError, match=message):
        registry.ToolSpec(**{"name": "x", "label": "x", **fields})


def test_the_vocabulary_is_the_parsers_table():
    assert METRIC_UNITS is metrics.UNITS
    assert set(metrics.UNITS.values()) <= {"B/s", "op/s", "s", "score", "%"}
    assert metrics.unit("read_lat") == "s" and metrics.unit("nope") is None


def test_limits_verbs_labels_and_direction():
    assert metrics.LIMIT_OPS == {
        "write_bw": "write",
        "read_bw": "read",
        "rewrite_bw": "write",
        "reread_bw": "read",
        "randwrite_bw": "write",
        "randread_bw": "read",
    }
    assert metrics.VERBS["randread_bw"] == "reads randomly"
    assert metrics.VERBS["dir_create"] == "creates directories"
    assert metrics.label("write_bw") == "Write throughput"
    assert metrics.label("rc_rdma_write_bw") == "RC RDMA write bandwidth"  # spelled out
    assert metrics.label("not_a_metric_lat") == "Not a metric latency"
    assert metrics.higher_is_better("write_bw") and metrics.higher_is_better("file_create")
    assert not metrics.higher_is_better("read_lat") and not metrics.higher_is_better("elapsed")
    assert metrics.get("tcp_bw").direction == "network"
    assert metrics.get("file_stat").direction == "metadata"


def test_a_limit_belongs_on_a_bandwidth():
    with pytest.raises(ValueError, match="a limit is"):
        metrics.MetricDef("x_lat", "s", "latency", "read", limit="read")
    with pytest.raises(ValueError, match="unknown direction"):
        metrics.MetricDef("x_bw", "B/s", "bandwidth", "sideways")


def test_the_comparison_reads_the_vocabulary():
    from experiments.comparison import charts, limits, spec, statements

    assert limits.LIMIT_OPS is metrics.LIMIT_OPS
    assert statements.VERBS is metrics.VERBS
    assert charts.METRIC_LABELS is metrics.LABELS
    assert spec.metric_unit("write_iops") == "op/s"


def test_model_choices_come_from_the_registry_without_a_migration():
    from experiments.models import Matrix, Run
    from experiments.models.runs import Tool

    assert Tool.values == registry.names()
    assert (
        Tool.FIO == "fio" and Tool.OTHER == "other" and Tool.STORAGEBENCH.label.startswith("BeeGFS")
    )
    run_tool = Run._meta.get_field("tool")
    matrix_tool = Matrix._meta.get_field("tool")
    # Callables: the migration names the function, not the list it returns.
    assert run_tool.deconstruct()[3]["choices"] is registry.tool_choices
    assert matrix_tool.deconstruct()[3]["choices"] is registry.runnable_choices
    assert list(run_tool.choices) == registry.tool_choices()
    assert [v for v, _ in matrix_tool.choices] == [t.name for t in registry.runnable()]


def test_registry_and_vocabulary_import_without_django():
    code = (
        "import sys, runners.registry, runners.metrics, runners.parsers, runners.tools; "
        "sys.exit(any(m == 'django' or m.startswith('django.') for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
