"""Issue 12: sentences that name their series' dimension and mark approximate published values
(item 6), and the comparison table's 95% CI column (item 4).

Sentences name the dimension of their series ("numjobs 2 writes … than numjobs 1"), and values a
study gives as "about" are marked (≈ in the table, "about" in the sentence). The table shows no
95% CI for n < 3, as the chart does.
"""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from experiments.comparison import ComparisonSpec, compute
from experiments.views.compare import PRESETS
from tests.lab import add_run, make_testbed

pytestmark = pytest.mark.django_db


@pytest.fixture
def published():
    call_command("load_published", verbosity=0)


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
