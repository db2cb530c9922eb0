"""One parameter, several spellings (issue 25, finding 3): a run's parameters are stored in one
normal form per kind (sizes in bytes, booleans, seconds, whole numbers) whichever way the run
came in (a matrix, an import, the bulk API, the published data), so the runs table's filters
read any spelling, sorts are numeric, comparison axes and exports show human units from one
formatter, and runs of '1m' and 1048576 are alike (one configuration key)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from experiments import comparison
from experiments.matrices import expansion as matrices
from experiments.models import ConfigSummary, Matrix, Run
from experiments.results.importing import import_output
from experiments.results.store import parse_stored
from tests.helpers.api import token_client
from tests.helpers.samples import sample

pytestmark = pytest.mark.django_db

URL = "/runs/table/"


def ingest(alice, *items) -> list[Run]:
    """Runs pushed through POST /api/runs/bulk/ (what beeweb-push sends)."""
    body = [
        {
            "testbed": "bench",
            "tool": item.get("tool", "fio"),
            "key": f"k{i}",
            "params": item["params"],
            "metrics": [{"name": "write_bw", "value": item.get("value", 1e9 + i)}],
        }
        for i, item in enumerate(items)
    ]
    response = token_client(alice).post("/api/runs/bulk/", body, format="json")
    assert response.status_code == 200, response.content
    return [Run.objects.get(client_key=f"k{i}") for i in range(len(items))]


def table(client, query) -> list[list[str]]:
    """The cells of the runs table's rows."""
    import re

    r = client.get(URL, query)
    assert r.status_code == 200, r.content.decode()
    body = r.content.decode()
    part = body[body.index('<table id="runs"') :]
    part = part[: part.index("</table>")]
    return [
        re.findall(r"<td[^>]*>([^<]*)</td>", row)
        for row in re.findall(r"<tr><td><a [^>]*>[^<]*</a></td>(.*?)</tr>", part, re.S)
    ]


# --- stored in one normal form -------------------------------------------------------------


def test_matrix_runs_store_sizes_in_bytes_and_booleans_whatever_was_typed(alice, bench):
    matrix = Matrix.objects.create(
        owner=alice,
        name="ior sizes",
        tool="ior",
        repetitions=1,
        timeout_s=120,
        fixed_params={"block_size": "4m", "direct": "yes", "iterations": "2"},
        axes=[{"param": "transfer_size", "values": ["256k", "1m"]}],
    )
    matrix.testbeds.set([bench])
    matrices.expand(matrix)
    runs = list(Run.objects.filter(matrix=matrix).order_by("pk"))
    assert sorted(r.params["transfer_size"] for r in runs) == [262144, 1048576]
    for run in runs:
        assert run.params["block_size"] == 4 * 2**20
        assert run.params["direct"] is True and run.params["iterations"] == 2
        # The argv keeps IOR's own spelling.
        assert run.argv[run.argv.index("-t") + 1] in ("256k", "1m")
    # Executed: the output parsed, the launched values win, still in bytes.
    run = runs[1]
    run.raw_output = sample("ior/ior-3.3.0-posix-ssf-48tasks-odirect-beegfs.txt")
    run.save(update_fields=["raw_output"])
    parse_stored(run, "ior")
    run.refresh_from_db()
    assert run.params["transfer_size"] in (262144, 1048576)
    assert run.params["block_size"] == 4 * 2**20


def test_fio_matrix_stores_bs_in_bytes_and_builds_the_same_argv(alice, bench):
    matrix = Matrix.objects.create(
        owner=alice,
        name="fio bs",
        tool="fio",
        repetitions=1,
        timeout_s=120,
        fixed_params={"size": "8m", "runtime": "1m"},
        axes=[{"param": "bs", "values": ["4k", "1m"]}],
    )
    matrix.testbeds.set([bench])
    matrices.expand(matrix)
    runs = {r.params["bs"]: r for r in Run.objects.filter(matrix=matrix)}
    assert set(runs) == {4096, 1048576}
    assert runs[4096].params["size"] == 8 * 2**20 and runs[4096].params["runtime"] == 60
    assert "--bs=4k" in runs[4096].argv and "--bs=1m" in runs[1048576].argv


def test_imports_and_bulk_items_store_the_normal_form(alice, bench):
    pushed = ingest(
        alice,
        {"params": {"bs": "4k", "direct": "true", "numjobs": "4", "runtime": "30s"}},
        {"tool": "ior", "params": {"transfer_size": "1m", "file_per_process": 1}},
    )
    assert pushed[0].params == {"bs": 4096, "direct": True, "numjobs": 4, "runtime": 30}
    assert pushed[1].params == {"transfer_size": 1048576, "file_per_process": True}
    # A raw-output item: what the client launched wins, in the normal form.
    body = [
        {
            "testbed": "bench",
            "tool": "fio",
            "key": "raw",
            "params": {"bs": "4 KiB", "direct": "on"},
            "raw_output": sample("fio/fio-3.6-json-randread-4k-qd1-ceph.json"),
        }
    ]
    assert token_client(alice).post("/api/runs/bulk/", body, format="json").status_code == 200
    raw = Run.objects.get(client_key="raw")
    assert raw.params["bs"] == 4096 and raw.params["direct"] is True
    assert raw.params["transfer_size"] == 4096
    imported = import_output(
        sample("fio/fio-3.6-json-randread-4k-qd1-ceph.json"), testbed=bench, owner=alice
    )
    assert imported.params["transfer_size"] == 4096


def test_published_data_is_stored_in_the_normal_form():
    from experiments.management.commands.load_published import load_published

    load_published()
    run = Run.objects.filter(published=True, params__has_key="aggregate_size").first()
    assert run is not None
    assert type(run.params["aggregate_size"]) is int  # 8e12 in the seed: 8000000000000
    # Idempotent: loading again changes nothing.
    assert load_published().stats["updated"] == 0


# --- the runs table: filters, sorts, cells, exports ----------------------------------------


@pytest.fixture
def spelled(alice, bench):
    """Runs whose transfer sizes, block sizes and flags came spelled every way."""
    return ingest(
        alice,
        {"tool": "ior", "params": {"transfer_size": "1m", "direct": "True"}, "value": 4e9},
        {"tool": "ior", "params": {"transfer_size": "256k", "direct": False}, "value": 3e9},
        {"params": {"bs": "4096", "transfer_size": 4096, "direct": 1}, "value": 2e9},
        {"params": {"bs": "1m", "transfer_size": 1048576, "direct": "no"}, "value": 1e9},
        {"tool": "dd", "params": {"bs": "8k", "transfer_size": "8192"}, "value": 5e8},
    )


@pytest.mark.parametrize("value", ["4096", "4k", "4K", "4 KiB", "4KiB"])
def test_a_size_filter_reads_any_spelling(alice_client, spelled, value):
    rows = table(alice_client, {"cols": "tool,param:bs", "p.bs": value})
    assert rows == [["fio", "4 KiB"]]


def test_transfer_size_filter_finds_every_tool(alice_client, spelled):
    rows = table(alice_client, {"cols": "tool,param:transfer_size", "p.transfer_size": "1m"})
    assert sorted(rows) == [["fio", "1 MiB"], ["ior", "1 MiB"]]
    rows = table(alice_client, {"cols": "tool", "p.transfer_size": "1048576"})
    assert sorted(rows) == [["fio"], ["ior"]]


def test_sizes_sort_as_numbers_and_show_units(alice_client, spelled):
    rows = table(alice_client, {"cols": "param:transfer_size", "sort": "param:transfer_size"})
    assert [r[0] for r in rows] == ["4 KiB", "8 KiB", "256 KiB", "1 MiB", "1 MiB"]
    rows = table(alice_client, {"cols": "param:transfer_size", "sort": "-param:transfer_size"})
    assert [r[0] for r in rows] == ["1 MiB", "1 MiB", "256 KiB", "8 KiB", "4 KiB"]


def test_booleans_are_one_value_and_filter_by_any_spelling(alice_client, spelled):
    rows = table(alice_client, {"cols": "tool,param:direct", "sort": "tool"})
    assert sorted(r[1] for r in rows) == ["no", "no", "yes", "yes", "—"]
    for value in ("true", "yes", "1", "True"):
        rows = table(alice_client, {"cols": "param:direct", "p.direct": value})
        assert [r[0] for r in rows] == ["yes", "yes"], value
    rows = table(alice_client, {"cols": "param:direct", "p.direct": "no"})
    assert [r[0] for r in rows] == ["no", "no"]


def test_exports_give_bytes_and_human_units(alice_client, spelled):
    q = {"cols": "param:transfer_size,param:direct", "sort": "param:transfer_size"}
    r = alice_client.get(URL + "runs.csv", q)
    rows = list(csv.reader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert rows[0][2:] == ["param:transfer_size [B]", "param:transfer_size", "param:direct"]
    assert [row[2:4] for row in rows[1:]] == [
        ["4096", "4 KiB"],
        ["8192", "8 KiB"],
        ["262144", "256 KiB"],
        ["1048576", "1 MiB"],
        ["1048576", "1 MiB"],
    ]
    assert sorted(row[4] for row in rows[1:]) == ["", "false", "false", "true", "true"]
    r = alice_client.get(URL + "runs.json", q)
    data = json.loads(b"".join(r.streaming_content))
    assert data["columns"][0] == {
        "key": "param:transfer_size",
        "label": "transfer_size",
        "kind": "size",
        "base_unit": "B",
    }
    assert data["runs"][0]["values"]["param:transfer_size"] == {"value": 4096, "display": "4 KiB"}
    directs = [run["values"]["param:direct"] for run in data["runs"]]
    assert sorted(map(str, directs)) == ["False", "False", "None", "True", "True"]


# --- alike runs and comparison axes --------------------------------------------------------


def test_runs_of_1m_and_1048576_are_alike(alice, bench):
    a, b = ingest(
        alice,
        {"tool": "ior", "params": {"transfer_size": "1m", "direct": "yes"}, "value": 1e9},
        {"tool": "ior", "params": {"transfer_size": 1048576, "direct": True}, "value": 3e9},
    )
    assert a.config_key == b.config_key
    rows = ConfigSummary.objects.filter(config_key=a.config_key, name="write_bw")
    assert rows.count() == 1 and rows.get().n == 2


def test_a_comparison_axis_has_one_label_per_size(alice, bench):
    ingest(
        alice,
        {"tool": "ior", "params": {"transfer_size": "1m"}, "value": 1e9},
        {"tool": "ior", "params": {"transfer_size": "256k"}, "value": 2e9},
        {"tool": "ior", "params": {"transfer_size": 1048576}, "value": 3e9},
        {"tool": "ior", "params": {"transfer_size": 262144}, "value": 4e9},
        {"tool": "ior", "params": {"transfer_size": "4 KiB"}, "value": 5e9},
    )
    spec = comparison.ComparisonSpec.from_query(
        {"metric": "write_bw", "x": "param:transfer_size", "ignore": "param:transfer_size"}
    )
    result = comparison.compute(spec, Run.objects.all())
    assert sorted(p.n for p in result.points) == [1, 2, 2]
    axis = result.charts[0].figure["layout"]["xaxis"]
    assert axis["ticktext"] == ["4 KiB", "256 KiB", "1 MiB"]
    # A filter on the axis in any spelling.
    spec = comparison.ComparisonSpec.from_query(
        {"metric": "write_bw", "x": "param:transfer_size", "f": "param:transfer_size:1m"}
    )
    result = comparison.compute(spec, Run.objects.all())
    assert [p.n for p in result.points] == [2]
