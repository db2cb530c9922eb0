"""The comparison table's 95% CI column (issue 12, item 4): no CI for n < 3, as the chart."""

from __future__ import annotations

import re

import pytest

from tests.lab import add_run, make_testbed

pytestmark = pytest.mark.django_db


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
