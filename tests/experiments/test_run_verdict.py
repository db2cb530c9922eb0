"""The verdict each run stores with its telemetry (Run.bottleneck, steady, collapsed): the
pure summary on synthetic series, kept current as each node's document arrives, and
recomputed for older runs by ``manage.py refresh_verdicts``."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from experiments.models import Run
from experiments.results import telemetry as stored
from experiments.shared.bottleneck import LATENCY_BOUND, steadiness, summary
from tests.helpers.comparison import add_run
from tests.helpers.telemetry import node, with_tool


def test_steady_state_and_whole_run_of_a_steady_run():
    # 12 live samples between idle ones: the leading and trailing zeros are not the run.
    s = steadiness(
        [with_tool(node(), [0, 100, 100, 100, 100, 110, 90, 100, 100, 100, 100, 100, 100, 0])]
    )
    w = s["write_bw"]
    assert w["samples"] == 12 and w["whole"] == 100.0 and w["steady"] == 100.0
    assert w["first"] == 100.0 and w["last"] == 100.0 and w["collapsed"] is False


def test_a_collapse_after_the_cache_filled_is_flagged():
    # Nine samples: thirds of three. First third 1000, last third 200 (< 50 %).
    bw = [1000, 1000, 1000, 600, 300, 200, 200, 200, 200]
    w = steadiness([with_tool(node(), bw)])["write_bw"]
    assert w["first"] == 1000.0 and w["last"] == 200.0 and w["collapsed"] is True
    assert w["whole"] == round(sum(bw) / 9, 1)
    assert w["steady"] == 200.0  # median of the second half (samples 4..8)
    # Exactly half is no collapse: the threshold is strict.
    assert not steadiness([with_tool(node(), [100] * 3 + [75] * 3 + [50] * 3)])["write_bw"][
        "collapsed"
    ]


def test_too_few_samples_give_the_whole_run_only():
    assert steadiness([with_tool(node(), [5, 1, 1, 1, 1])]) == {
        "write_bw": {"samples": 5, "whole": 1.8}
    }


def test_summary_kinds():
    disk = node("storage02", **{"disk_util:sdb": [0.99] * 10})
    found = summary([with_tool(node(), [1000] * 9 + [100]), disk])
    assert found["bottleneck"] == "disk" and not found["collapsed"]
    assert found["evidence"].startswith("write: sdb on storage02 at 99% utilisation")
    cpu = summary([node(tool_cpu_top=[1.0] * 10)])
    assert cpu["bottleneck"] == "cpu" and cpu["evidence"].startswith("one core of client01")
    idle = summary([node()])
    assert idle == {"bottleneck": "none", "evidence": LATENCY_BOUND, "steady": {},
                    "collapsed": False}  # fmt: skip
    empty = node()
    empty["t"], empty["series"] = [], {}
    assert summary([empty])["bottleneck"] == "unknown"
    assert summary([])["bottleneck"] == ""


@pytest.mark.django_db
def test_saving_each_node_refreshes_the_run_verdict(bench):
    run = add_run(bench, 1e9)
    assert run.bottleneck == "" and run.steady == {}
    client = with_tool(node("stor1"), [1000, 1000, 1000, 400, 300, 300, 300, 300, 300])
    stored.save(run, client)
    run.refresh_from_db()
    assert run.bottleneck == "none" and run.collapsed is True
    assert run.steady["write_bw"]["first"] == 1000.0
    # The storage server's document arrives later: its saturated disk becomes the verdict.
    stored.save(run, node("storage02", **{"disk_util:sdb": [0.97] * 10}))
    run.refresh_from_db()
    assert run.bottleneck == "disk"
    assert "sdb on storage02 at 97% utilisation" in run.bottleneck_evidence


@pytest.mark.django_db
def test_refresh_verdicts_command(bench, capsys):
    run = add_run(bench, 1e9)
    plain = add_run(bench, 1e9)
    stored.save(run, node("stor1", tool_cpu_top=[1.0] * 10))
    Run.objects.filter(pk=run.pk).update(bottleneck="", bottleneck_evidence="")
    call_command("refresh_verdicts")
    assert "refresh_verdicts: 1 runs (cpu 1)" in capsys.readouterr().out
    run.refresh_from_db()
    plain.refresh_from_db()
    assert run.bottleneck == "cpu" and plain.bottleneck == ""
