"""Issue 12, items 3 and 6 (sentences) and the table's CI column (item 4).

Published studies stay apart from own runs: data source is a dimension (``source``: a study's
name or "own runs"), every published preset is pinned to its studies, and a series mixing
published and own runs gets no difference sentence unless the user split or filtered by source.
Sentences name the dimension of their series ("numjobs 2 writes … than numjobs 1"), and values
a study gives as "about" are marked (≈ in the table, "about" in the sentence). The table shows
no 95% CI for n < 3, as the chart does.
"""

from __future__ import annotations

import html
import re
from urllib.parse import urlencode

import pytest
from django.core.management import call_command

from experiments.comparison import ComparisonSpec, compute, dimensions
from experiments.comparison.presets import DASHBOARD_PRESETS, PRESETS
from experiments.models import Run, Target
from experiments.published import seed000, seed002
from tests.helpers.comparison import add_run, make_testbed

pytestmark = pytest.mark.django_db

ARM_VS_X86 = "metric=write_bw&x=param:threads&series=arch&baseline=x86_64"


@pytest.fixture
def published():
    call_command("load_published", verbosity=0)


def own_runs(owner) -> None:
    """A user's own runs that would join every published preset if it were not pinned: fio
    runs on localhost-like x86, Arm and POWER labs (write, read, file creates; threads 1, 4,
    256 and none), dd and StorageBench on their RAID0/RAID10 targets, IOzone at 4 threads."""
    labs = [
        make_testbed(owner, "own-x86", "x86_64", "0"),
        make_testbed(owner, "own-x86-r10", "x86_64", "10"),
        make_testbed(owner, "own-arm", "aarch64", "0"),
        make_testbed(owner, "own-power", "ppc64le", "10"),
    ]
    for tb in labs:
        for threads in (1, 4, 256, None):
            extra = {} if threads is None else {"threads": threads}
            for rep in range(3):
                value = 1e9 + rep * 1e7
                add_run(tb, value, **extra)
                add_run(tb, value * 1.2, metric="read_bw", **extra)
                add_run(tb, 5e3 + rep, metric="file_create", **extra)
        target = Target.objects.filter(testbed=tb).first()
        for tool in ("dd", "storagebench", "iozone"):
            for rep in range(3):
                run = add_run(tb, 2e9 + rep * 1e7)
                Run.objects.filter(pk=run.pk).update(tool=tool, target=target)
        # IOzone by threads, write and read: the by-threads presets hold IOzone runs only.
        for metric in ("write_bw", "read_bw"):
            for rep in range(3):
                run = add_run(tb, 2.2e9 + rep * 1e7, metric=metric, threads=4)
                Run.objects.filter(pk=run.pk).update(tool="iozone")


def summary(query: str) -> tuple[list[tuple], list[str]]:
    result = compute(ComparisonSpec.from_query(query))
    assert result.errors == []
    points = sorted((p.metric, p.series_key, p.x_key, p.y_key, p.n) for p in result.points)
    return points, [c.sentence for c in result.comparisons]


def test_source_is_a_dimension(published, alice):
    own_runs(alice)
    result = compute(ComparisonSpec.from_query("metric=write_bw&x=&series=source"))
    sources = {p.series_name for p in result.points}
    assert dimensions.OWN_RUNS in sources
    assert {seed000.SOURCE, seed002.SOURCE} <= sources
    own = [p for p in result.points if p.series_name == dimensions.OWN_RUNS]
    assert all(p.published_runs == 0 and p.own_runs == p.n for p in own)
    assert {p.source for p in own} == {"own runs"}
    # As a filter and on the x axis (own runs of different configurations stay apart).
    only_own = compute(
        ComparisonSpec.from_query("metric=write_bw&x=source&series=&f=source:own runs")
    )
    assert {p.x for p in only_own.points} == {dimensions.OWN_RUNS}
    assert sum(p.n for p in only_own.points) == sum(p.n for p in own)


def test_every_published_preset_holds_no_own_run(published, alice):
    before = {title: summary(query) for title, query in PRESETS}
    assert all(points for points, _ in before.values())
    own_runs(alice)
    for title, query in PRESETS:
        assert summary(query) == before[title], title
        result = compute(ComparisonSpec.from_query(query))
        assert all(p.own_runs == 0 and p.published_runs == p.n for p in result.points), title
        # Unpinned, the same comparison would have taken the own runs in.
        unpinned = "&".join(part for part in query.split("&") if not part.startswith("f=source"))
        assert summary(unpinned)[0] != before[title][0], title
    assert all(preset in PRESETS for preset in DASHBOARD_PRESETS)


def test_dashboard_and_compare_page_link_the_pinned_presets(published, alice_client):
    for url, presets in (("/", DASHBOARD_PRESETS), ("/compare/", PRESETS)):
        page = alice_client.get(url).content.decode()
        for title, query in presets:
            assert f'href="{url if url != "/" else "/compare/"}?{html.escape(query)}"' in page or (
                f'href="?{html.escape(query)}"' in page
            ), title
            assert "f=source" in query


def test_own_runs_never_join_a_published_series_silently(published, alice):
    """The finding: own fio runs at threads 4 on x86 joined the published x86 series and gave
    "aarch64 (Arm) writes 66% slower than x86_64 at threads 4"."""
    lab = make_testbed(alice, "localhost", "x86_64", "0")
    for rep in range(3):
        add_run(lab, 9e9 + rep * 1e8, threads=4)
    result = compute(ComparisonSpec.from_query(ARM_VS_X86))
    assert [c for c in result.comparisons if c.claimed] == []
    assert all(p.diff_pct is None for p in result.points)
    # The own runs are a variant of their own (no line of the study's runs holds them).
    assert not any(p.own_runs and p.published_runs for p in result.points)
    x86 = {p.series for p in result.points if p.series_name == "x86_64" and p.own_runs}
    assert x86 and not x86 & {p.series for p in result.points if p.published_runs}
    (at4,) = [c for c in result.comparisons if c.x == "4" and "aarch64" in c.series]
    assert "data source 000 Huawei/ThinkParQ vs own runs" in at4.sentence
    assert "tool ior vs fio" in at4.sentence
    # Split by source: the own runs are their own series; filtered, the user chose the pair.
    split = compute(ComparisonSpec.from_query(ARM_VS_X86 + "&y=source"))
    assert {p.y for p in split.points if p.series_name == "x86_64"} == {"own runs", seed002.SOURCE}
    chosen = (
        ARM_VS_X86 + "&" + urlencode([("f", "source:own runs"), ("f", f"source:{seed000.SOURCE}")])
    )
    # Even chosen by the user, published IOR against own fio is not like for like.
    (cmp,) = compute(ComparisonSpec.from_query(chosen)).comparisons
    assert not cmp.claimed and "tool ior vs fio" in cmp.sentence


def test_own_runs_never_pool_with_a_study_in_one_point(published, alice):
    # Own dd runs on RAID0/RAID10 targets land beside the published dd runs: each point holds
    # one data source, and only pairs of the same kind are compared.
    own_runs(alice)
    query = "metric=write_bw&x=tool&series=raid&tool=dd&baseline=10"
    result = compute(ComparisonSpec.from_query(query))
    assert all(not (p.published_runs and p.own_runs) for p in result.points)
    raid0 = [p for p in result.points if p.series_name == "RAID0"]
    assert sum(p.published_runs for p in raid0) == 1 and sum(p.own_runs for p in raid0) == 6
    for c in result.comparisons:
        if c.claimed:
            pair = [p for p in result.points if p.series in (c.series, c.baseline)]
            assert len({bool(p.own_runs) for p in pair}) == 1, c.sentence


def test_sentences_name_the_dimension(alice):
    lab = make_testbed(alice, "lab", "x86_64", "0")
    for value in (1.00e9, 1.01e9, 0.99e9):
        add_run(lab, value, numjobs=1)
        add_run(lab, value * 1.83, numjobs=2)
    result = compute(
        ComparisonSpec.from_query("metric=write_bw&x=&series=param:numjobs&baseline=1")
    )
    (sentence,) = [c.sentence for c in result.comparisons]
    assert re.fullmatch(
        r"numjobs 2 writes 83% faster than numjobs 1 \(p [<=] [0-9.]+, n = 3 each\)", sentence
    ), sentence
    # Values that say what they are stand alone.
    result = compute(ComparisonSpec.from_query("metric=write_bw&x=param:numjobs&series=arch"))
    assert result.comparisons == []


def test_approximate_published_values_are_marked(published, alice_client):
    title, query = next(p for p in PRESETS if p[0] == "RAID0 vs RAID10: dd write per device")
    result = compute(ComparisonSpec.from_query(query))
    (sentence,) = [c.sentence for c in result.comparisons]
    assert sentence == (
        "RAID0 writes about 50% faster than RAID10 with dd (single values, no significance "
        "test; n = 1 each; RAID0's value is approximate)"
    )
    approximate = {p.series: p.approximate for p in result.points}
    assert approximate == {"RAID0": True, "RAID10": False}  # "about 5.1 GB/s", "3.4GB/s"
    page = alice_client.get(f"/compare/?{query}").content.decode()
    assert "≈5.1" in page and "≈3.4" not in page
    api = alice_client.get(f"/api/compare/?{query}").json()
    assert {p["series_key"]: p["approximate"] for p in api["points"]} == {"0": True, "10": False}


def test_table_shows_no_ci_below_three_runs(alice, alice_client):
    lab = make_testbed(alice, "lab", "x86_64", "0")
    for value in (3e9, 121e9):
        add_run(lab, value, threads=4)
    for value in (5e9, 5.1e9, 4.9e9):
        add_run(lab, value, threads=8)
    page = alice_client.get("/compare/?metric=write_bw&x=param:threads&series=arch").content
    rows = re.findall(r"<tr>.*?</tr>", page.decode(), re.S)
    four = next(r for r in rows if "<td>4</td>" in r)
    eight = next(r for r in rows if "<td>8</td>" in r)
    ci = re.compile(r'<td class="num ci">(.*?)</td>', re.S)
    assert "n &lt; 3" in ci.search(four).group(1)
    assert "–" in ci.search(eight).group(1) and "n &lt; 3" not in ci.search(eight).group(1)


def test_too_many_configurations_name_what_varies(alice, monkeypatch):
    """Runs that differ in block size and direction at every x are not pooled; beyond
    MAX_POINTS configurations the comparison says what varies instead of drawing them all."""
    from experiments.comparison import computation

    lab = make_testbed(alice, "lab", "x86_64", "0")
    for bs in ("4k", "64k", "1m"):
        for rw in ("read", "write"):
            add_run(lab, 1e9, threads=4, bs=bs, rw=rw)
    query = "metric=write_bw&x=param:threads&series=arch"
    assert len(compute(ComparisonSpec.from_query(query)).points) == 6
    monkeypatch.setattr(computation, "MAX_POINTS", 5)
    result = compute(ComparisonSpec.from_query(query))
    assert result.points == [] and result.charts == []
    (error,) = result.errors
    assert "6 different configurations" in error
    assert "What varies: bs (3 values), rw (2 values)." in error
    # Told to let them differ, the runs pool into one point again.
    pooled = compute(ComparisonSpec.from_query(query + "&ignore=param:bs&ignore=param:rw"))
    assert [p.n for p in pooled.points] == [6]
