"""Comparison statistics: the pure-Python t distribution and Welch's test against scipy, and
the database aggregation of experiments.comparison against numpy/scipy on known data."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from django.urls import reverse
from scipy import special
from scipy import stats as ss

from experiments.comparison import ComparisonResult, ComparisonSpec, compute, working_set
from experiments.models import (
    Run,
    TuningSet,
)
from experiments.shared import stats
from tests.helpers.comparison import add_run, make_testbed

# --- Pure statistics against scipy --------------------------------------------------------


@pytest.mark.parametrize("df", [1, 1.5, 2, 3, 4, 5.7, 9, 30, 250])
@pytest.mark.parametrize("q", [0.0005, 0.025, 0.1, 0.5, 0.6, 0.9, 0.975, 0.995, 0.9995])
def test_t_quantile_matches_scipy(df, q):
    assert stats.t_ppf(q, df) == pytest.approx(ss.t.ppf(q, df), rel=1e-8, abs=1e-10)


@pytest.mark.parametrize("df", [1, 2, 3.3, 10, 100])
@pytest.mark.parametrize("t", [-5.0, -1.0, 0.0, 0.3, 2.0, 12.7])
def test_t_tail_matches_scipy(df, t):
    assert stats.t_sf(t, df) == pytest.approx(ss.t.sf(t, df), rel=1e-9, abs=1e-14)


@pytest.mark.parametrize(
    "a,b,x", [(0.5, 0.5, 0.3), (2.5, 0.5, 0.9), (10, 3, 0.5), (0.5, 20, 0.01), (150, 0.5, 0.999)]
)
def test_incomplete_beta_matches_scipy(a, b, x):
    assert stats.betainc(a, b, x) == pytest.approx(special.betainc(a, b, x), rel=1e-10)


SAMPLES = [
    ([5.1, 5.0, 5.3], [3.4, 3.5, 3.3]),  # n = 3, clear difference
    ([10.0, 12.0], [11.0, 11.5]),  # n = 2
    ([1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 2.1, 1.9, 2.05, 1.95]),  # n = 5, unequal variances
    ([100.0, 140.0, 90.0], [101.0, 99.0, 100.5, 100.2, 99.7]),  # 3 vs 5, unequal variances
    ([7.0, 7.1], [1.0, 30.0, 15.0]),  # 2 vs 3
]


@pytest.mark.parametrize("a,b", SAMPLES)
def test_welch_matches_scipy(a, b):
    a, b = np.array(a), np.array(b)
    ours = stats.welch(len(a), a.mean(), a.var(ddof=1), len(b), b.mean(), b.var(ddof=1))
    theirs = ss.ttest_ind(a, b, equal_var=False)
    assert ours.t == pytest.approx(theirs.statistic, rel=1e-10)
    assert ours.p == pytest.approx(theirs.pvalue, rel=1e-8)


@pytest.mark.parametrize("values", [[5.1, 5.0, 5.3], [1.0, 2.0], [3.0, 3.5, 2.5, 4.0, 3.2]])
def test_confidence_interval_matches_scipy(values):
    a = np.array(values)
    lo, hi = stats.confidence_interval(len(a), a.mean(), a.std(ddof=1))
    s_lo, s_hi = ss.t.interval(0.95, len(a) - 1, loc=a.mean(), scale=ss.sem(a))
    assert (lo, hi) == (pytest.approx(s_lo, rel=1e-9), pytest.approx(s_hi, rel=1e-9))


def test_no_test_without_spread_or_repetitions():
    assert stats.welch(1, 5.0, math.nan, 3, 3.0, 0.1) is None
    assert stats.welch(3, 5.0, 0.0, 3, 3.0, 0.0) is None
    assert stats.confidence_interval(1, 5.0, None) is None
    assert stats.cv(0.0, 1.0) is None


# --- A small lab: two testbeds with known limits and known runs (tests/helpers/comparison.py) ---

ARM = [5.1e9, 5.0e9, 5.3e9]
X86 = [3.4e9, 3.5e9, 3.3e9]


@pytest.fixture
def lab(alice):
    arm = make_testbed(alice, "arm", "aarch64", "0")
    x86 = make_testbed(alice, "x86", "x86_64", "10")
    tuned = TuningSet.objects.create(owner=alice, name="tuned")
    tuned.replace_params([("storage", "tuneNumWorkers", "64")])
    for v in ARM:
        add_run(arm, v, threads=8, size="64g", numjobs=8, direct=True, tuning=tuned)
    for v in X86:
        add_run(x86, v, threads=8, size="64g", numjobs=8, direct=True)
    add_run(arm, 9e9, threads=16, size="1g", numjobs=1)  # small working set, cached
    add_run(x86, 4e9, threads=16, size="64g", numjobs=8, direct=True)
    return arm, x86


def point(result, series, x, metric="write_bw"):
    return next(
        p for p in result.points if p.metric == metric and p.series_name == series and p.x == x
    )


@pytest.mark.django_db
def test_point_statistics_match_numpy_and_scipy(lab):
    result = compute(ComparisonSpec.from_query("metric=write_bw&x=param:threads&series=arch"))
    arm = point(result, "aarch64 (Arm)", "8")
    a = np.array(ARM) / 1e9
    assert arm.n == 3
    assert arm.mean == pytest.approx(a.mean())
    assert arm.median == pytest.approx(np.median(a))
    assert (arm.min, arm.max) == (pytest.approx(a.min()), pytest.approx(a.max()))
    assert arm.stddev == pytest.approx(a.std(ddof=1))
    assert arm.cv == pytest.approx(a.std(ddof=1) / a.mean())
    lo, hi = ss.t.interval(0.95, 2, loc=a.mean(), scale=ss.sem(a))
    assert (arm.ci_low, arm.ci_high) == (pytest.approx(lo), pytest.approx(hi))
    assert not arm.noisy
    single = point(result, "x86_64", "16")
    assert single.n == 1 and single.stddev is None and single.ci_low is None


@pytest.mark.django_db
def test_even_medians_and_noisy_points(alice):
    tb = make_testbed(alice, "tb", "x86_64", "0")
    values = [1e9, 2e9, 4e9, 10e9]
    for v in values:
        add_run(tb, v, threads=4)
    result = compute(ComparisonSpec.from_query("metric=write_bw&x=param:threads&series=raid"))
    (p,) = result.points
    assert p.median == pytest.approx(np.median(values) / 1e9)
    assert p.noisy and any("noisy" in f for f in p.flags)


@pytest.mark.django_db
def test_baseline_difference_and_welch_p_value(lab):
    spec = ComparisonSpec.from_query("metric=write_bw&x=param:threads&series=arch&baseline=x86_64")
    result = compute(spec)
    (cmp8,) = [c for c in result.comparisons if c.x == "8"]
    assert cmp8.diff_pct == pytest.approx((np.mean(ARM) / np.mean(X86) - 1) * 100)
    assert cmp8.p_value == pytest.approx(ss.ttest_ind(ARM, X86, equal_var=False).pvalue)
    assert cmp8.significant
    assert cmp8.sentence == (
        "aarch64 (Arm) writes 51% faster than x86_64 at threads 8 (p < 0.001, n = 3 each)"
    )
    # At 16 threads Arm's run is buffered with a 1g working set, x86's direct with 64g: no
    # difference is claimed across that, and the sentence names what else differs.
    (cmp16,) = [c for c in result.comparisons if c.x == "16"]
    assert not cmp16.claimed and cmp16.diff_pct is None and cmp16.p_value is None
    assert cmp16.sentence.startswith("No difference claimed between aarch64 (Arm) and x86_64")
    # Sizes in units whatever the spelling (runners.params.human; issue 25, finding 3).
    assert "direct not stated vs yes; numjobs 1 vs 8; size 1 GiB vs 64 GiB" in cmp16.sentence
    assert ["numjobs", "1", "8"] in cmp16.confounders


@pytest.mark.django_db
def test_not_significant_differences_say_so(alice):
    a_tb = make_testbed(alice, "a", "aarch64", "0")
    b_tb = make_testbed(alice, "b", "x86_64", "0")
    for v in (10e9, 12e9, 8e9):
        add_run(a_tb, v, threads=1)
    for v in (9e9, 13e9, 9.5e9):
        add_run(b_tb, v, threads=1)
    result = compute(
        ComparisonSpec.from_query("metric=write_bw&x=param:threads&series=arch&baseline=x86_64")
    )
    (c,) = result.comparisons
    assert c.significant is False
    assert "not significant" in c.sentence and "slower" in c.sentence


@pytest.mark.django_db
def test_efficiency_names_the_bottleneck_and_flags_caching(lab):
    result = compute(ComparisonSpec.from_query("metric=write_bw&x=param:threads&series=arch"))
    arm8 = point(result, "aarch64 (Arm)", "8")
    # RAID0: 2 servers x 2 targets x 4 drives x 2 GB/s = 32 GB/s; network 2 x 12.5 = 25 GB/s.
    assert arm8.limit_name == "network (storage servers)"
    assert arm8.limit_value == pytest.approx(25.0)
    assert arm8.efficiency == pytest.approx(np.mean(ARM) / 25e9 * 100)
    x86 = point(result, "x86_64", "8")
    # RAID10 halves writes: 2 x 2 x 4 x 2 / 2 = 16 GB/s, below the network.
    assert x86.limit_name == "drives" and x86.limit_value == pytest.approx(16.0)
    cached = point(result, "aarch64 (Arm)", "16")
    assert any("working set" in f for f in cached.flags)  # 1 GiB < 4 clients x 64 GiB
    assert not any("working set" in f for f in arm8.flags)  # direct I/O


@pytest.mark.django_db
def test_result_above_the_limit_is_a_likely_cache_effect(lab):
    arm, _ = lab
    add_run(arm, 40e9, threads=32, direct=True)
    result = compute(ComparisonSpec.from_query("metric=write_bw&x=param:threads&series=arch"))
    p = point(result, "aarch64 (Arm)", "32")
    assert p.efficiency == pytest.approx(160.0)
    assert any("cache effect" in f for f in p.flags)


@pytest.mark.django_db
def test_normalisation_per_server_target_client_and_core(lab):
    def mean(norm):
        spec = ComparisonSpec.from_query(
            f"metric=write_bw&x=param:threads&series=arch&f=param:threads:8&norm={norm}"
        )
        return point(compute(spec), "aarch64 (Arm)", "8").mean

    total = np.mean(ARM) / 1e9
    assert mean("") == pytest.approx(total)
    assert mean("server") == pytest.approx(total / 2)
    assert mean("target") == pytest.approx(total / 4)
    assert mean("client") == pytest.approx(total / 4)
    assert mean("core") == pytest.approx(total / 128)


@pytest.mark.django_db
def test_client_normalisation_uses_the_nodes_a_run_used(lab):
    arm, _ = lab
    add_run(arm, 6e9, threads=64, nodes=2)
    spec = ComparisonSpec.from_query(
        "metric=write_bw&x=param:threads&series=arch&f=param:threads:64&norm=client"
    )
    assert point(compute(spec), "aarch64 (Arm)", "64").mean == pytest.approx(3.0)


@pytest.mark.django_db
def test_filters_or_within_and_across_attributes(lab):
    def series(query):
        return {p.series_name for p in compute(ComparisonSpec.from_query(query)).points}

    base = "metric=write_bw&x=param:threads&series=arch"
    assert series(base + "&f=arch:aarch64") == {"aarch64 (Arm)"}
    assert series(base + "&f=arch:aarch64&f=arch:x86_64") == {"aarch64 (Arm)", "x86_64"}
    assert series(base + "&f=arch:aarch64&f=raid:10") == set()
    assert series(base + "&f=raid:10&f=arch:x86_64") == {"x86_64"}
    assert series(base + "&f=tuning:storage.tuneNumWorkers:64") == {"aarch64 (Arm)"}
    assert series(base + "&f=hw:cores:64&f=param:threads:16") == {"aarch64 (Arm)", "x86_64"}
    assert series(base + "&f=tuning:tuned") == {"aarch64 (Arm)"}
    only_untuned = compute(ComparisonSpec.from_query(base + "&f=tuning:(none)&f=arch:aarch64"))
    assert [(p.series, p.x) for p in only_untuned.points] == [("aarch64 (Arm)", "16")]
    assert series(base + "&from=2000-01-01&to=2999-01-01") == {"aarch64 (Arm)", "x86_64"}
    assert series(base + "&to=2000-01-01") == set()


@pytest.mark.django_db
def test_spec_round_trips_through_the_url():
    query = (
        "metric=write_bw&metric=read_bw&x=param%3Athreads&series=raid&y=param%3Anodes"
        "&baseline=10&f=arch%3Aaarch64&f=param%3Ars%3A1m&tool=fio&from=2024-01-01"
        "&norm=server&chart=heatmap&err=minmax&reps=1&unit=GiB"
    )
    spec = ComparisonSpec.from_query(query)
    assert spec.errors == []
    assert spec.filters == [("arch", "aarch64"), ("param:rs", "1m")]
    assert ComparisonSpec.from_query(spec.to_query()) == spec
    bad = ComparisonSpec.from_query("metric=nope&x=param:a;b&f=zzz:1&from=yesterday")
    assert len(bad.errors) == 4


@pytest.mark.django_db
def test_configuration_differences_name_hardware_testbed_and_tuning(lab):
    result = compute(
        ComparisonSpec.from_query("metric=write_bw&x=param:threads&series=arch&baseline=x86_64")
    )
    # Arm's line changes tuning set between 8 and 16 threads: two variants, each against x86.
    diffs = {d.series: d for d in result.differences}
    diff = diffs["aarch64 (Arm) · tuning set tuned"]
    assert diff.baseline == "x86_64"
    rows = {(r[0], r[1]): (r[2], r[3]) for r in diff.rows}
    assert rows[("hardware", "architecture")] == ("aarch64", "x86_64")
    assert rows[("testbed", "RAID level")] == ("RAID0", "RAID10")
    assert rows[("testbed", "BeeGFS version")] == ("7.4.4", "7.4.5")
    assert ("tuning", "storage.tuneNumWorkers") in rows
    assert ("testbed", "local file system") not in rows


@pytest.mark.django_db
def test_charts_keep_series_colours_and_offer_heatmaps(lab):
    arm, x86 = lab
    for stripe in (1, 4):
        for chunk in ("512k", "1m"):
            add_run(arm, 2e9 * stripe, threads=1, stripe_count=stripe, chunk_size=chunk)
            add_run(x86, 1e9 * stripe, threads=1, stripe_count=stripe, chunk_size=chunk)
    result = compute(
        ComparisonSpec.from_query(
            "metric=write_bw&metric=read_bw&x=param:threads&series=arch&reps=1"
        )
    )
    (chart,) = result.charts  # read_bw has no runs
    colours = {t["name"]: t["marker"]["color"] for t in chart.figure["data"]}
    # Threads 1 sweeps stripe count and chunk size: each setting is its own variant.
    arm = "aarch64 (Arm) · tuning set tuned, chunk size not stated, stripe count not stated"
    x86 = "x86_64 · chunk size not stated, stripe count not stated"
    assert colours[arm] == result.colours[arm]
    assert colours[arm] != colours[x86]
    assert any(t.get("mode") == "markers" for t in chart.figure["data"])  # every run
    heat = compute(
        ComparisonSpec.from_query(
            "metric=write_bw&x=param:chunk_size&y=param:stripe_count&series=arch&chart=heatmap"
            "&f=param:threads:1"
        )
    )
    assert [c.kind for c in heat.charts] == ["heatmap", "heatmap"]
    z = heat.charts[0].figure["data"][0]["z"]
    assert z == [[2.0, 2.0], [8.0, 8.0]]
    bars = compute(ComparisonSpec.from_query("metric=write_bw&x=tool&series=arch&chart=bar"))
    assert bars.charts[0].figure["data"][0]["type"] == "bar"


@pytest.mark.django_db
def test_result_json_round_trip(lab):
    result = compute(
        ComparisonSpec.from_query("metric=write_bw&x=param:threads&series=arch&baseline=x86_64")
    )
    data = json.loads(json.dumps(result.to_json()))
    again = ComparisonResult.from_json(data)
    assert again == result


def test_working_set_from_parameters():
    assert working_set("fio", {"size": "1g", "numjobs": 4}) == 4 * 2**30
    assert working_set("ior", {"block_size": 2**30, "segments": 2, "threads": 8}) == 16 * 2**30
    assert working_set("iozone", {"aggregate_size": 5e12}) == 5e12
    assert working_set("mdtest", {"files_total": 100}) is None


@pytest.mark.django_db
def test_query_count_does_not_grow_with_runs(alice, django_assert_max_num_queries):
    tbs = [
        make_testbed(alice, f"tb{i}", arch, raid)
        for i, (arch, raid) in enumerate([("aarch64", "0"), ("x86_64", "10")])
    ]
    spec = ComparisonSpec.from_query(
        "metric=write_bw&x=param:threads&series=arch&baseline=x86_64&reps=1"
    )

    def count_queries() -> int:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as ctx:
            compute(spec, Run.objects.all())
        return len(ctx.captured_queries)

    for tb in tbs:
        for t in (1, 2):
            add_run(tb, 1e9, threads=t)
    few = count_queries()
    for tb in tbs:
        for t in (1, 2, 4, 8):
            for r in range(10):
                add_run(tb, 1e9 + r * 1e7, threads=t, size="1g", numjobs=r + 1)
    many = count_queries()
    assert many == few
    with django_assert_max_num_queries(12):
        compute(spec, Run.objects.all())


@pytest.mark.django_db
def test_compare_page_query_count_independent_of_runs(
    alice_client, lab, django_assert_max_num_queries
):
    arm, x86 = lab
    url = reverse("experiments:compare") + (
        "?metric=write_bw&x=param:threads&series=arch&baseline=x86_64"
    )
    with django_assert_max_num_queries(25) as few:
        alice_client.get(url)
    for tb in (arm, x86):
        for r in range(30):
            add_run(tb, 1e9 + r, threads=2 ** (r % 5))
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = alice_client.get(url)
    assert response.status_code == 200


@pytest.mark.django_db
def test_n_n_against_n_1_is_like_for_like(alice):
    """IOR runs state -F twice, as launched (``file_per_proc``) and as IOR's output says it
    (``file_per_process``): a series over either name compares N-N with N-1 like for like
    instead of naming the other name as a difference (issue 27)."""
    tb = make_testbed(alice, "tb", "x86_64", "0")
    for fpp, values in ((True, (4e9, 4.2e9, 3.8e9)), (False, (2e9, 2.1e9, 1.9e9))):
        for v in values:
            add_run(tb, v, threads=4, file_per_proc=fpp, file_per_process=fpp)
    for name in ("file_per_proc", "file_per_process"):
        spec = ComparisonSpec.from_query(
            f"metric=write_bw&x=param:threads&series=param:{name}&baseline=false"
        )
        (c,) = compute(spec).comparisons
        assert c.claimed and c.confounders == []
        label = name.replace("_", " ")
        assert c.sentence == (
            f"{label} yes writes 100% faster than {label} no at threads 4 (p < 0.001, n = 3 each)"
        )
    # Ignoring one name ignores the other too.
    spec = ComparisonSpec.from_query("metric=write_bw&x=param:threads&series=raid")
    ignored = ComparisonSpec.from_query(
        "metric=write_bw&x=param:threads&series=raid&ignore=param:file_per_proc"
    )
    assert len(compute(spec).points) == 2 and len(compute(ignored).points) == 1
