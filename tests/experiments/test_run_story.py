"""The run page's story (experiments.comparison.run_story): telemetry panels on matched x axes, the
verdict beside the theoretical limit, the latency percentiles, and the export of telemetry in
the run's API detail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection

from experiments.results import telemetry as stored
from experiments.results.store import replace_metrics
from tests.helpers.comparison import add_run
from tests.helpers.telemetry import telemetry_doc as doc

pytestmark = pytest.mark.django_db


@pytest.fixture
def story_run(bench):
    run = add_run(bench, 1.2e9)
    replace_metrics(
        run,
        [
            {"name": "write_bw", "value": 1.2e9, "unit": "B/s"},
            {"name": "write_lat", "value": 0.0008, "unit": "s", "stat": "p50"},
            {"name": "write_lat", "value": 0.004, "unit": "s", "stat": "p99"},
            {"name": "write_lat", "value": 0.012, "unit": "s", "stat": "p99.9"},
            {"name": "write_lat", "value": 0.1, "unit": "s", "stat": "p99", "extra": {"job": "1"}},
        ],
    )
    client = doc("stor1", "2026-01-01T10:00:00+00:00", tool_cpu_top=[0.2] * 10)
    client["tool"] = {"t": [1.0, 2.0, 3.0, 4.0, 5.0], "series": {"write_bw": [1.2e9] * 5}}
    stored.save(run, client)
    stored.save(
        run,
        doc("storage02", "2026-01-01T10:00:02+00:00", **{"disk_util:sdb": [0.99] * 10}),
    )
    return run


def figure_of(response, name):
    html = response.content.decode()
    start = html.index(f'<script id="{name}" type="application/json">') + len(
        f'<script id="{name}" type="application/json">'
    )
    return json.loads(html[start : html.index("</script>", start)])


def test_run_page_shows_panels_on_one_time_axis(alice_client, story_run):
    response = alice_client.get(story_run.get_absolute_url())
    assert response.status_code == 200
    fig = figure_of(response, "telemetry-figure")
    assert fig["panels"] == [
        "Tool throughput",
        "CPU of stor1",
        "Disk throughput on stor1",
        "Network on stor1",
        "Memory of stor1",
        "CPU of storage02",
        "Disk utilisation on storage02",
        "Disk throughput on storage02",
        "Network on storage02",
        "Memory of storage02",
    ]
    layout = fig["layout"]
    axes = [k for k in layout if k.startswith("xaxis")]
    assert len(axes) == 10
    assert all(layout[k].get("matches") == "x" for k in axes if k != "xaxis")  # linked zoom
    by_name = {(t["name"], t["yaxis"]): t for t in fig["data"]}
    tool = by_name[("write_bw (stor1)", "y")]
    # A trace names its node's time array (shared by the node's traces) in fig["xs"].
    assert fig["xs"][tool["x"]] == [1.0, 2.0, 3.0, 4.0, 5.0] and tool["y"] == [1.2] * 5  # GB/s
    util = by_name[("sdb", "y7")]
    assert fig["xs"][util["x"]][0] == 3.0  # storage02 started 2 s later: its t=1 is at 3 s
    assert util["y"][0] == 99  # percent
    cpu = by_name[("busiest core", "y2")]
    assert cpu["x"] == by_name[("all cores busy", "y2")]["x"] and cpu["y"] == [30] * 10
    assert layout["shapes"][0]["x0"] == 0.0 and layout["shapes"][0]["x1"] == 5.0  # write phase

    html = response.content.decode()
    assert "sdb on storage02 at 99% utilisation during 100% of the write phase" in html
    assert "Theoretical limit:" in html
    assert "Not sampled on stor1: beegfs (not installed)" in html

    lat = figure_of(response, "latency-figure")
    (bars,) = lat["data"]
    assert bars["name"] == "write_lat" and bars["x"] == ["p50", "p99", "p99.9"]
    assert bars["y"] == [0.8, 4.0, 12.0]  # ms; the per-job p99 is not the run's


def test_run_without_telemetry_has_no_story(alice_client, bench):
    run = add_run(bench, 1e9)
    response = alice_client.get(run.get_absolute_url())
    assert response.status_code == 200
    assert b"run-story" not in response.content


def test_api_detail_exports_telemetry(alice_client, story_run):
    detail = alice_client.get(f"/api/runs/{story_run.uuid}/").json()
    hosts = [d["hostname"] for d in detail["telemetry"]]
    assert hosts == ["stor1", "storage02"]
    first = detail["telemetry"][0]
    assert first["format"] == "beeweb-telemetry/1"
    assert first["tool"]["series"]["write_bw"] == [1.2e9] * 5
    assert first["series"]["cpu_busy"] == [0.2] * 10
    listed = alice_client.get("/api/runs/").json()["results"][0]
    assert "telemetry" not in listed  # only the detail carries the series


def sample_run(bench, tool, name):
    from experiments.models import Run
    from experiments.results.store import parse_stored
    from tests.helpers.samples import read_sample

    text = read_sample(f"{tool}/{name}")
    run = Run.objects.create(testbed=bench, tool=tool, status="imported", raw_output=text)
    assert parse_stored(run) is None
    return run


def test_ior_iterations_on_the_time_axis(alice_client, bench):
    """ior-3.3.0dev-posix-fpp-vv-2nodes.txt, iteration 0: write 571.46 MiB/s for 0.699962 s,
    then read 429.89 MiB/s for 0.930467 s (its 'total(s)' column)."""
    run = sample_run(bench, "ior", "ior-3.3.0dev-posix-fpp-vv-2nodes.txt")
    response = alice_client.get(run.get_absolute_url())
    fig = figure_of(response, "telemetry-figure")
    assert fig["panels"] == ["Tool throughput"]
    traces = {t["name"]: t for t in fig["data"]}
    write, read = traces[f"write_bw ({run.tool})"], traces[f"read_bw ({run.tool})"]
    assert fig["xs"][write["x"]] == [0.0, 0.7, 1.63]
    assert write["y"][:2] == [round(571.46 * 2**20 / 1e9, 3)] * 2 and write["y"][2] is None
    assert read["y"] == [None, round(429.89 * 2**20 / 1e9, 3), round(429.89 * 2**20 / 1e9, 3)]
    assert b"Bottleneck" not in response.content  # no telemetry, no verdict


def test_elbencho_live_csv_on_the_time_axis(alice_client, bench):
    """elbencho-3.0-29-livecsvex-4hosts-read-64K.csv: one Total row every 2 s of the READ
    phase (11 rows), the first at 2000 ms with 79 MiB/s and 1265 IOPS."""
    run = sample_run(bench, "elbencho", "elbencho-3.0-29-livecsvex-4hosts-read-64K.csv")
    fig = figure_of(alice_client.get(run.get_absolute_url()), "telemetry-figure")
    (bw,) = [t for t in fig["data"] if t["name"].startswith("read_bw")]
    x = fig["xs"][bw["x"]]
    assert len(x) == 11 and x[:3] == [2.0, 4.0, 6.0]
    assert bw["y"][:3] == [round(m * 2**20 / 1e9, 3) for m in (79, 90, 59)]


def test_mdtest_verbose_iterations_on_the_time_axis(alice_client, bench):
    """mdtest-1.9.3-verbose-shared-dir-96tasks-2iter.txt (-v): iteration 1 prints "Tree
    creation: 0.000 sec" (no span: left out), "Directory creation: 31.788 sec, 96.639
    ops/sec", "Directory stat: 0.034 sec", "Directory removal: 37.651 sec", "File creation:
    27.252 sec, 112.724 ops/sec", file stat 0.002, read 0.011, removal 25.264, tree removal
    0.010; iteration 2 starts with "Directory creation: 29.532 sec, 104.022 ops/sec"."""
    run = sample_run(bench, "mdtest", "mdtest-1.9.3-verbose-shared-dir-96tasks-2iter.txt")
    fig = figure_of(alice_client.get(run.get_absolute_url()), "telemetry-figure")
    assert fig["panels"] == ["Tool metadata rate"]
    traces = {t["name"]: t for t in fig["data"]}
    assert "Tree creates (mdtest)" not in traces  # 0.000 s: nothing to draw
    create = traces["Directory creates (mdtest)"]
    x = fig["xs"][create["x"]]
    drawn = [(t, y) for t, y in zip(x, create["y"], strict=True) if y is not None]
    iteration2 = round(31.788 + 0.034 + 37.651 + 27.252 + 0.002 + 0.011 + 25.264 + 0.010, 3)
    assert drawn == [
        (0.0, 97.0),
        (31.788, 97.0),
        (iteration2, 104.0),
        (round(iteration2 + 29.532, 3), 104.0),
    ]
    files = traces["File creates (mdtest)"]
    start = round(31.788 + 0.034 + 37.651, 3)
    assert [y for t, y in zip(x, files["y"], strict=True) if t == start] == [113.0]


def test_mdtest_4_task_0_rates_are_not_drawn_as_the_runs(alice_client, bench):
    """tests/runners/fixtures/ior_real/mdtest-4.0.0-v-2tasks-killed-1iter.txt: two tasks;
    "Tree creation: 0.001 sec, 1071.890 ops/sec" (task 0 alone: the run's), then file
    creation 0.786 s, stat 0.001 s, read 0.001 s, removal 0.010 s (task 0's own rates), then
    "Tree removal: 0.007 sec, 134.735 ops/sec" and iteration 2's tree creation 0.012 s."""
    from experiments.models import Run
    from experiments.results.store import parse_stored

    fixture = Path(__file__).parents[1] / "runners" / "fixtures" / "ior_real"
    text = (fixture / "mdtest-4.0.0-v-2tasks-killed-1iter.txt").read_text()
    run = Run.objects.create(testbed=bench, tool="mdtest", status="imported", raw_output=text)
    assert parse_stored(run) is None
    fig = figure_of(alice_client.get(run.get_absolute_url()), "telemetry-figure")
    traces = {t["name"]: t for t in fig["data"]}
    assert set(traces) == {"Tree creates (mdtest)", "Tree removals (mdtest)"}
    removal = traces["Tree removals (mdtest)"]
    x = fig["xs"][removal["x"]]
    start = round(0.001 + 0.786 + 0.001 + 0.001 + 0.010, 3)  # task 0's phases still take time
    drawn = [(t, y) for t, y in zip(x, removal["y"], strict=True) if y is not None]
    assert drawn == [(start, 135.0), (round(start + 0.007, 3), 135.0)]


def test_iozone_has_no_time_axis(alice_client, bench):
    """IOzone's auto table is over file and record sizes and prints no times: no panel."""
    run = sample_run(bench, "iozone", "iozone-3.465-auto-mode-odirect-srp-xfs.txt")
    response = alice_client.get(run.get_absolute_url())
    assert b'id="telemetry-figure"' not in response.content


def test_clock_offset_against_the_database_server():
    """PostgreSQL runs on this machine: the offset is this machine's clock against itself,
    within the round trip. SQLite shares this process's clock: nothing to measure."""
    clock = stored.clock_offset()
    if connection.vendor != "postgresql":
        assert clock is None
        return
    assert clock["against"] == "database"
    assert abs(clock["offset_s"]) <= max(clock["rtt_s"], 0.01)
    assert 0 <= clock["rtt_s"] < 1


def test_a_node_whose_clock_is_off_by_more_than_a_second_is_moved_and_named(alice_client, bench):
    """stor1 (the launcher) and storage02 each measured their clock against the database:
    storage02's is 3 s ahead, so its first reading stamped 10:00:05 happened at 10:00:02 on
    stor1's clock; storage03's is 0.4 s off (within a second: left as it is); meta02 has no
    measurement (not checked)."""
    run = add_run(bench, 1e9)
    launcher = doc("stor1", "2026-01-01T10:00:00+00:00")
    launcher["meta"]["clock"] = {"offset_s": 0.25, "rtt_s": 0.002, "against": "database"}
    ahead = doc("storage02", "2026-01-01T10:00:05+00:00")
    ahead["meta"]["clock"] = {"offset_s": -2.75, "rtt_s": 0.004, "against": "database"}
    near = doc("storage03", "2026-01-01T10:00:01+00:00")
    near["meta"]["clock"] = {"offset_s": 0.65, "rtt_s": 0.004, "against": "database"}
    unknown = doc("meta02", "2026-01-01T10:00:00.500000+00:00")
    for d in (launcher, ahead, near, unknown):
        stored.save(run, d)
    response = alice_client.get(run.get_absolute_url())
    html = response.content.decode()
    assert "the clock of storage02 is 3.0 s ahead of stor1&#x27;s" in html
    assert "its panels are moved 3.0 s earlier" in html
    assert "the clock of meta02 was not checked" in html
    assert 'data-host="storage03"' not in html  # 0.4 s: nothing to say
    fig = figure_of(response, "telemetry-figure")
    # Each node's CPU panel, by hostname: meta02 (unchecked, 0.5 s), stor1 (the reference),
    # storage02 (moved from 5 s to 2 s), storage03 (left at 1 s); t[0] is 1 s.
    xs = [fig["xs"][t["x"]][0] for t in fig["data"] if t["name"] == "all cores busy"]
    assert xs == [1.5, 1.0, 3.0, 2.0]
    run.refresh_from_db()  # the stored verdict is computed on the same aligned axis
    assert run.bottleneck in ("none", "disk", "cpu", "network")


@pytest.mark.parametrize(
    "clock",
    [
        {"offset_s": "3"},
        {"offset_s": True},
        {"offset_s": 1e300},
        {"offset_s": 2.0, "rtt_s": "fast"},
        {"offset_s": 2.0, "rtt_s": -1},
        "ahead",
    ],
)
def test_an_imported_clock_that_is_no_measurement_is_not_checked(alice_client, bench, clock):
    """meta is free-form in an import: a clock that is not numbers within bounds is treated as
    no measurement (named as not checked), never a 500."""
    run = add_run(bench, 1e9)
    launcher = doc("stor1", "2026-01-01T10:00:00+00:00")
    launcher["meta"]["clock"] = {"offset_s": 0.0, "rtt_s": 0.001}
    other = doc("storage02", "2026-01-01T10:00:01+00:00")
    other["meta"]["clock"] = clock
    stored.store(run, stored.validate([launcher, other]))
    response = alice_client.get(run.get_absolute_url())
    assert response.status_code == 200
    assert "the clock of storage02 was not checked" in response.content.decode()
