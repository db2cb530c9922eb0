"""The runs table (issue 16 item 3): sorting by a metric, a parameter or a field, filters,
keyset pages that neither repeat nor skip runs when sort values tie, 400s that say which
parameter is wrong, and the CSV/JSON exports with the table's columns and both units."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from experiments.comparison import runs_table
from experiments.models import Run
from experiments.results.store import replace_metrics
from tests.helpers.comparison import add_run, make_testbed

pytestmark = pytest.mark.django_db

URL = "/runs/table/"


@pytest.fixture
def sweep(alice):
    """fio write throughput over numjobs on two testbeds; numjobs 4 ties at 2 GB/s."""
    a = make_testbed(alice, "alpha", "x86_64", "0")
    b = make_testbed(alice, "beta", "aarch64", "0")
    runs = {}
    for numjobs, value in ((1, 1.0e9), (2, 1.5e9), (4, 2.0e9), (8, 3.0e9)):
        runs[("alpha", numjobs)] = add_run(a, value, numjobs=numjobs, bs="1m")
        runs[("beta", numjobs)] = add_run(b, value if numjobs == 4 else value / 2, numjobs=numjobs)
    return runs


def labels(response) -> list[str]:
    """The table's rows as "testbed/numjobs" (the run column names the tool and testbed)."""
    body = response.content.decode()
    table = body[body.index('<table id="runs"') :]
    table = table[: table.index("</table>")]
    out = []
    for row in re.findall(r"<tr><td><a [^>]*>([^<]*)</a></td>(.*?)</tr>", table, re.S):
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", row[1])
        out.append((row[0], cells))
    return out


def test_sorts_by_a_metric_in_display_units(alice_client, sweep):
    r = alice_client.get(URL, {"cols": "param:numjobs,metric:write_bw", "sort": "-metric:write_bw"})
    assert r.status_code == 200
    body = r.content.decode()
    assert "Write throughput (GB/s)" in body
    rows = labels(r)
    values = [float(cells[1]) for _, cells in rows]
    assert values == sorted(values, reverse=True)
    assert values[0] == 3.0 and values[-1] == 0.5
    # Ascending, and binary units: 3e9 B/s is 2.79 GiB/s.
    r = alice_client.get(
        URL, {"cols": "metric:write_bw", "sort": "metric:write_bw", "units": "binary"}
    )
    rows = labels(r)
    assert "Write throughput (GiB/s)" in r.content.decode()
    assert [c[0] for _, c in rows][-1] == "2.79"
    assert [c[0] for _, c in rows][0] == "0.466"


def test_sorts_by_a_parameter_numerically_and_missing_values_last(alice_client, sweep, alice):
    tb = make_testbed(alice, "gamma", "x86_64", "0")
    add_run(tb, 1e9)  # no numjobs
    r = alice_client.get(URL, {"cols": "param:numjobs", "sort": "-param:numjobs"})
    cells = [c[0] for _, c in labels(r)]
    assert cells == ["8", "8", "4", "4", "2", "2", "1", "1", "—"]
    r = alice_client.get(URL, {"cols": "param:numjobs", "sort": "param:numjobs"})
    assert [c[0] for _, c in labels(r)] == ["1", "1", "2", "2", "4", "4", "8", "8", "—"]


def test_filters(alice_client, sweep, alice):
    tb = sweep[("alpha", 1)].testbed
    r = alice_client.get(URL, {"cols": "param:numjobs,testbed", "testbed": str(tb.uuid)})
    assert {c[1] for _, c in labels(r)} == {"alpha"}
    r = alice_client.get(URL, {"cols": "param:numjobs,testbed", "p.numjobs": "4"})
    assert sorted(c[1] for _, c in labels(r)) == ["alpha", "beta"]
    # A filter on a column not shown stays in the form.
    r = alice_client.get(URL, {"cols": "testbed", "p.numjobs": "4"})
    assert 'name="p.numjobs" id="rt-p.numjobs" size="10" value="4"' in r.content.decode()
    # Metric range in the column's display unit (GB/s): 1.2..2 keeps 1.5, 2, 2 and 1.5.
    r = alice_client.get(
        URL, {"cols": "metric:write_bw", "m.write_bw": "1.2..2", "sort": "metric:write_bw"}
    )
    assert [c[0] for _, c in labels(r)] == ["1.5", "1.5", "2", "2"]
    r = alice_client.get(URL, {"cols": "metric:write_bw", "m.write_bw": "2.5.."})
    assert [c[0] for _, c in labels(r)] == ["3"]
    Run.objects.filter(pk=sweep[("beta", 8)].pk).update(status="failed")
    r = alice_client.get(URL, {"cols": "param:numjobs,testbed", "status": "failed"})
    assert [c for _, c in labels(r)] == [["8", "beta"]]
    r = alice_client.get(URL, {"cols": "tool", "published": "yes"})
    assert labels(r) == [] and "No runs match." in r.content.decode()
    Run.objects.filter(testbed=tb).update(owner=alice)
    r = alice_client.get(URL, {"cols": "testbed", "owner": "mine"})
    assert [c[0] for _, c in labels(r)] == ["alpha"] * 4


def test_default_columns_are_the_varying_parameters_and_common_metrics(alice_client, sweep):
    r = alice_client.get(URL)
    body = r.content.decode()
    head = body[body.index("<thead>") : body.index("</thead>")]
    cols = re.findall(r'data-col="([^"]+)"', head)
    # bs is missing on beta's runs: it varies too; the metric every run has; created.
    assert cols == ["param:bs", "param:numjobs", "metric:write_bw", "created"]


def test_cursor_pages_neither_repeat_nor_skip_with_ties(alice_client, alice):
    tb = make_testbed(alice, "ties", "x86_64", "0")
    # 23 runs over 4 distinct values (many ties) and 3 without the metric.
    for i in range(20):
        add_run(tb, float(1e9 * (i % 4)), i=i)
    for i in range(3):
        Run.objects.create(testbed=tb, tool="fio", status="failed", params={"i": 100 + i})
    expected = set(Run.objects.values_list("params__i", flat=True))
    for sort in ("-metric:write_bw", "metric:write_bw", "param:i", "-created", "tool"):
        seen = []
        query = {"cols": "param:i,metric:write_bw", "sort": sort}
        pages = 0
        while True:
            spec, runs = runs_table.TableSpec.parse(query, alice)
            rows, after = runs_table.fetch_page(spec, runs, size=5)
            seen += [r["cells"]["param:i"] for r in rows]
            pages += 1
            if after is None:
                break
            query = {**query, "after": after}
        assert len(seen) == len(set(seen)) == 23, sort
        assert set(seen) == expected
        assert pages == 5
    # Through the page: the "more" link carries the cursor.
    r = alice_client.get(URL, {"cols": "metric:write_bw", "sort": "-metric:write_bw"})
    more = re.search(r'id="runs-more"', r.content.decode())
    assert more is None  # 23 runs fit one page of 50


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"cols": "param:a;b"}, "cols: unknown column"),
        ({"cols": "colour"}, "cols: unknown column"),
        ({"sort": "-nope"}, "cols: unknown column 'nope'"),
        ({"tool": "nosuchtool"}, "tool: unknown tool"),
        ({"testbed": "xyz"}, "testbed: not a testbed id"),
        ({"status": "great"}, "status: one of"),
        ({"owner": "bob"}, "owner: 'mine'"),
        ({"published": "maybe"}, "published: 'yes' or 'no'"),
        ({"m.write_bw": "3"}, "m.write_bw: a range LO..HI"),
        ({"m.write_bw": "a..b"}, "is not a number"),
        ({"m.write_bw": "5..1"}, "lower end is above"),
        ({"m.write_bw": "nan.."}, "not a finite number"),
        ({"after": "!!!"}, "after: not a cursor"),
        ({"sort": "metric:write_bw", "after": "WyJ4IiwxXQ"}, "after: not a cursor"),
        ({"units": "furlongs"}, "units:"),
    ],
)
def test_bad_parameters_answer_400_with_the_reason(alice_client, sweep, query, message):
    r = alice_client.get(URL, query)
    assert r.status_code == 400
    assert message in r.content.decode().replace("&#x27;", "'")
    r = alice_client.get(URL + "runs.csv", query)
    assert r.status_code == 400
    assert message in r.content.decode()


def test_csv_export_has_the_columns_in_both_units_and_every_run(alice_client, sweep):
    q = {"cols": "param:numjobs,metric:write_bw,testbed", "sort": "-metric:write_bw"}
    r = alice_client.get(URL + "runs.csv", q)
    assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
    table = list(csv.reader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert table[0] == [
        "run",
        "label",
        "param:numjobs",
        "metric:write_bw [B/s]",
        "metric:write_bw [GB/s]",
        "testbed",
    ]
    assert len(table) == 9
    assert table[1][2:] == ["8", "3000000000.0", "3", "alpha"]
    assert [float(row[3]) for row in table[1:]] == sorted(
        (float(row[3]) for row in table[1:]), reverse=True
    )
    r = alice_client.get(URL + "runs.json", {**q, "units": "binary"})
    data = json.loads(b"".join(r.streaming_content))
    assert data["columns"][1] == {
        "key": "metric:write_bw",
        "label": "Write throughput (GiB/s)",
        "base_unit": "B/s",
        "unit": "GiB/s",
    }
    first = data["runs"][0]["values"]
    assert first["param:numjobs"] == 8
    assert first["metric:write_bw"]["value"] == 3e9
    assert first["metric:write_bw"]["display"] == pytest.approx(3e9 / 2**30)
    assert len(data["runs"]) == 8
    assert alice_client.get(URL + "runs.xml").status_code == 404


def test_export_spans_pages(alice_client, alice):
    tb = make_testbed(alice, "many", "x86_64", "0")
    for i in range(runs_table.PAGE_SIZE + 7):
        run = Run.objects.create(testbed=tb, tool="fio", status="succeeded", params={"i": i})
        replace_metrics(run, [{"name": "read_iops", "value": float(i % 3), "unit": "op/s"}])
    r = alice_client.get(URL, {"cols": "param:i,metric:read_iops", "sort": "metric:read_iops"})
    body = r.content.decode()
    assert "Read IOPS (op/s)" in body or "(op/s)" in body
    more = re.search(r'id="runs-more"|href="([^"]+)"[^>]*id="runs-more"', body)
    assert more
    href = re.search(r'<a href="([^"]+)" [^>]*id="runs-more"', body).group(1).replace("&amp;", "&")
    second = labels(alice_client.get(href))
    first = labels(r)
    assert len(first) == 50 and len(second) == 7
    ids = [c[0] for _, c in first + second]
    assert len(set(ids)) == 57
    # No count: "more", and on PostgreSQL the planner's estimate (not exact, never 0).
    from django.db import connection

    if connection.vendor == "postgresql":
        assert re.search(r'id="runs-estimate"[^>]*>about \d+ runs match', body)
    else:
        assert "runs-estimate" not in body
    rows = list(
        csv.reader(
            io.StringIO(
                b"".join(
                    alice_client.get(URL + "runs.csv", {"cols": "param:i"}).streaming_content
                ).decode()
            )
        )
    )
    assert len(rows) == 58


def test_htmx_gets_the_table_alone_and_anonymous_sees_nothing(alice_client, sweep):
    from django.test import Client

    r = alice_client.get(URL, {"cols": "tool"}, headers={"HX-Request": "true"})
    assert r.content.decode().lstrip().startswith('<div id="runs-table">')
    r = Client().get(URL)
    assert r.status_code in (302, 200)
    if r.status_code == 200:
        assert labels(r) == []


def test_the_matrix_filter_lists_the_newest_and_the_chosen_and_finds_the_rest(
    alice_client, alice, sweep
):
    """A lab's history of matrices does not weigh on every page: the filter lists the
    newest 100 and the one filtered by, and the comparison builder's search finds others."""
    from experiments.models import Matrix
    from experiments.views.compare import MATRIX_CHOICES

    Matrix.objects.bulk_create(
        [Matrix(owner=alice, name=f"m{i:03d}", tool="fio") for i in range(MATRIX_CHOICES + 20)]
    )
    oldest = Matrix.objects.order_by("created", "id").first()
    body = alice_client.get(URL, {"matrix": str(oldest.uuid)}).content.decode()
    select = body[body.index('id="rt-matrix"') :]
    select = select[: select.index("</select>")]
    assert select.count("<option") == MATRIX_CHOICES + 2  # "any", the chosen, the newest
    assert f'value="{oldest.uuid}" selected' in select
    assert f"of {MATRIX_CHOICES + 20} listed" in body and 'id="rt-matrix-find"' in body
    found = alice_client.get(
        "/compare/matrices/", {"q": "m00", "blank": "any", "matrix": str(oldest.uuid)}
    ).content.decode()
    assert found.startswith('<option value="">any</option>')
    assert found.count("<option") == 1 + 10  # m000 … m009, the chosen first and selected
