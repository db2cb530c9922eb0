"""Matrices: axes, exclusion rules, idempotent expansion, preview, YAML, and their pages."""

from __future__ import annotations

import re
import socket

import pytest
import yaml
from django.urls import reverse

from experiments.execution import dispatch as dispatching
from experiments.matrices.axes import MatrixError, axis_values
from experiments.matrices.expansion import cancel_runs, expand, progress, rerun_failed, resume
from experiments.matrices.files import from_yaml, to_yaml
from experiments.matrices.preview import plan
from experiments.matrices.rules import FACT_NAMES, compile_rule, evaluate_rule
from experiments.models import Matrix, Node, Run

pytestmark = pytest.mark.django_db


def test_axis_values_explicit_and_ranges():
    assert axis_values({"param": "t", "values": [1, 2]}) == [1, 2]
    pow2 = axis_values({"param": "t", "range": {"start": 1, "stop": 1024}})
    assert pow2 == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    linear = {"param": "t", "range": {"start": 4, "stop": 16, "step": 4, "scale": "linear"}}
    assert axis_values(linear) == [4, 8, 12, 16]
    for bad in (
        {"param": "t", "values": []},
        {"param": "t", "values": [1, 1]},
        {"param": "t", "range": {"start": 0, "stop": 4}},
        {"param": "t", "range": {"start": 8, "stop": 4}},
        {"param": "t", "range": {"start": 1, "stop": 4, "scale": "log"}},
    ):
        with pytest.raises(MatrixError, match="axis t"):
            axis_values(bad)


@pytest.mark.parametrize(
    "rule",
    [
        "__import__('os').system('id')",
        "numjobs.__class__",
        "[x for x in numjobs]",
        "lambda: 1",
        "open('/etc/passwd')",
        "numjobs >",
    ],
)
def test_exclusion_rules_reject_anything_but_arithmetic(rule):
    with pytest.raises(MatrixError, match="exclusions"):
        compile_rule(rule, {"numjobs", "cores"})


def test_exclusion_rule_unknown_name_lists_known_names():
    with pytest.raises(MatrixError, match="unknown name 'threads'.*clients"):
        compile_rule("threads > 4", set(FACT_NAMES))


def test_exclusion_rules_evaluate():
    tree = compile_rule(
        "numjobs > clients * cores and rw in ['write']", {"numjobs", "clients", "cores", "rw"}
    )
    assert evaluate_rule(tree, {"numjobs": 8, "clients": 1, "cores": 4, "rw": "write"})
    assert not evaluate_rule(tree, {"numjobs": 8, "clients": 1, "cores": 4, "rw": "read"})
    # An unknown fact never hides a cell.
    assert not evaluate_rule(tree, {"numjobs": 8, "clients": 1, "cores": None, "rw": "write"})


def test_expansion_is_idempotent(fio_matrix):
    first = expand(fio_matrix)
    assert first == {"created": 24, "existing": 0, "excluded": 0}
    assert expand(fio_matrix)["created"] == 0
    assert fio_matrix.runs.count() == 24
    run = fio_matrix.runs.get(params__rw="read", params__numjobs=4, repetition=2)
    assert run.status == Run.Status.PLANNED
    assert run.queue == "node.stor1"
    assert run.argv[0] == "fio"
    # In the normal forms (runners.params); the matrix keeps what was typed.
    assert run.params == {"size": 8 * 2**20, "bs": 2**20, "rw": "read", "numjobs": 4}
    # Three repetitions of one cell share its key; cells differ.
    assert len(set(fio_matrix.runs.values_list("cell_key", flat=True))) == 8


def test_adding_an_axis_value_expands_only_the_new_cells(fio_matrix):
    expand(fio_matrix)
    fio_matrix.axes[1]["values"].append(16)
    fio_matrix.save()
    assert expand(fio_matrix)["created"] == 6


def test_exclusions_skip_cells(fio_matrix, profile):
    # The R740xd client has 2 × 24 cores: skip numjobs above half of them.
    fio_matrix.exclusions = ["numjobs * 8 > clients * cores"]
    fio_matrix.save()
    result = plan(fio_matrix)
    assert result.excluded == 2  # numjobs 8 for write and read
    assert result.runs == 18
    assert expand(fio_matrix)["created"] == 18


def test_preview_has_commands_data_volume_and_estimates(fio_matrix):
    result = plan(fio_matrix)
    assert result.runs == 24 and not result.errors
    eight = next(c for c in result.cells if c.cell.params["numjobs"] == 8)
    assert eight.data_bytes == 8 * 8 * 1024 * 1024
    assert eight.argv[0] == "fio"
    # No earlier runs: no estimate; then one finished run of the cell gives one.
    assert result.estimate_s is None
    expand(fio_matrix)
    from datetime import timedelta

    from django.utils import timezone

    run = fio_matrix.runs.get(params__rw="write", params__numjobs=8, repetition=1)
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.SUCCEEDED, started_at=now, finished_at=now + timedelta(seconds=12)
    )
    again = plan(fio_matrix)
    cell = next(c for c in again.cells if c.cell.key == run.cell_key)
    assert cell.estimate_s == 12


@pytest.mark.parametrize("value", ["1m; rm -rf /", "$(reboot)", "1m\nrm", "`id`"])
def test_injection_in_a_parameter_is_rejected_before_anything_runs(fio_matrix, value):
    fio_matrix.fixed_params["bs"] = value
    fio_matrix.save()
    result = plan(fio_matrix)
    assert result.errors and all("bs" in c.error for c in result.errors)
    with pytest.raises(MatrixError, match="bs"):
        expand(fio_matrix)
    assert not fio_matrix.runs.exists()


def test_path_outside_the_benchmark_directory_is_rejected(fio_matrix):
    fio_matrix.fixed_params["directory"] = "../../etc"
    fio_matrix.save()
    with pytest.raises(MatrixError, match="directory"):
        expand(fio_matrix)


def test_testbed_without_benchmark_directory_is_explained(fio_matrix, bench):
    bench.benchmark_dir = ""
    bench.save()
    assert "no benchmark directory" in plan(fio_matrix).errors[0].error


def test_dispatch_queues_on_commit_with_fresh_tokens(
    fio_matrix, django_capture_on_commit_callbacks
):
    expand(fio_matrix)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        ids = list(fio_matrix.runs.values_list("pk", flat=True)[:2])
        assert dispatching.dispatch(ids) == 2
    assert len(callbacks) == 1
    tokens = set(Run.objects.filter(pk__in=ids).values_list("dispatch_token", flat=True))
    assert len(tokens) == 2 and None not in tokens
    assert set(Run.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"queued"}


def test_cancel_queued_runs(fio_matrix, django_capture_on_commit_callbacks):
    expand(fio_matrix)
    with django_capture_on_commit_callbacks(execute=False):
        dispatching.dispatch(list(fio_matrix.runs.values_list("pk", flat=True)))
    assert cancel_runs(fio_matrix.runs.all()) == {"cancelled": 24, "stopping": 0}
    assert progress(fio_matrix)["percent"] == 100


def test_yaml_round_trip(fio_matrix, alice):
    text = to_yaml(fio_matrix)
    data = yaml.safe_load(text)
    assert data["axes"] == {"rw": ["write", "read"], "numjobs": [1, 2, 4, 8]}
    assert data["testbeds"] == ["bench"]
    copy = from_yaml(text, alice)
    assert copy.pk != fio_matrix.pk
    assert copy.axes == fio_matrix.axes and copy.fixed_params == fio_matrix.fixed_params
    assert list(copy.testbeds.all()) == list(fio_matrix.testbeds.all())
    assert plan(copy).runs == 24


@pytest.mark.parametrize(
    "text, message",
    [
        ("- just a list", "mapping"),
        ("name: x\ntool: fio\nsurprise: 1", "unknown keys: surprise"),
        ("name: x\ntool: rm\ntestbeds: [bench]", "tool"),
        ("name: x\ntool: fio\ntestbeds: [nowhere]", "no testbed named 'nowhere'"),
        ("name: x\ntool: fio\ntestbeds: [bench]\nrepetitions: 0", "repetitions"),
        (
            "name: x\ntool: fio\ntestbeds: [bench]\naxes: {numjobs: {range: {start: 4}}}",
            "axis numjobs",
        ),
        ("name: [unclosed", "not valid YAML at line .*flow sequence at line 1"),
    ],
)
def test_yaml_errors_name_the_field(bench, alice, text, message):
    with pytest.raises(MatrixError, match=message):
        from_yaml(text, alice)


# --- Pages --------------------------------------------------------------------------------


def test_matrix_form_creates_a_matrix_with_ranges(alice_client, bench):
    response = alice_client.post(
        reverse("experiments:matrix_new"),
        {
            "name": "sweep",
            "tool": "fio",
            "launch_mode": "single",
            "tasks_per_node": 1,
            "testbeds": [bench.pk],
            "repetitions": 2,
            "timeout_s": 600,
            "drop_caches": "on",
            "params_text": "size = 16m\nbs = 1m",
            "axes_text": "rw = write, read\nnumjobs = pow2(1..8)",
            "exclusions_text": "numjobs > clients * cores",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    matrix = Matrix.objects.get(name="sweep")
    assert matrix.axes[1] == {"param": "numjobs", "range": {"start": 1, "stop": 8, "scale": "pow2"}}
    assert matrix.fixed_params == {"size": "16m", "bs": "1m"}
    page = alice_client.get(matrix.get_absolute_url()).content.decode()
    assert "16</strong> runs" in page and "fio" in page


def test_matrix_form_rejects_unknown_parameters_and_rules(alice_client, bench):
    response = alice_client.post(
        reverse("experiments:matrix_new"),
        {
            "name": "bad",
            "tool": "fio",
            "launch_mode": "single",
            "tasks_per_node": 1,
            "testbeds": [bench.pk],
            "repetitions": 1,
            "timeout_s": 60,
            "params_text": "blocksize = 1m",
            "axes_text": "numjobs = 1, 2",
            "exclusions_text": "open('x')",
        },
    )
    text = response.content.decode()
    assert response.status_code == 200
    assert "fio has no parameter &#x27;blocksize&#x27;" in text
    assert "Call is not allowed" in text
    assert not Matrix.objects.exists()


def test_launch_page_action_refuses_invalid_matrix(alice_client, fio_matrix):
    fio_matrix.fixed_params["bs"] = "1m; rm -rf /"
    fio_matrix.save()
    response = alice_client.post(
        reverse("experiments:matrix_launch", args=[fio_matrix.uuid]), follow=True
    )
    assert "Nothing was launched" in response.content.decode()
    assert not fio_matrix.runs.exists()


def test_launch_queues_runs_and_progress_polls(
    alice_client, fio_matrix, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        alice_client.post(reverse("experiments:matrix_launch", args=[fio_matrix.uuid]))
    assert fio_matrix.runs.filter(status="queued").count() == 24
    part = alice_client.get(
        reverse("experiments:matrix_progress", args=[fio_matrix.uuid]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'hx-trigger="every 2s"' in part and "0 of 24 finished" in part
    assert "No worker is online for node.stor1" in part


def test_matrix_pages_access(alice_client, bob_client, fio_matrix, alice):
    from django.test import Client

    client = Client()
    url = fio_matrix.get_absolute_url()
    assert alice_client.get(url).status_code == 200
    assert bob_client.get(url).status_code == 200
    assert client.get(url).status_code == 302
    for name in ("matrix_launch", "matrix_cancel", "matrix_rerun", "matrix_resume"):
        assert (
            bob_client.post(reverse(f"experiments:{name}", args=[fio_matrix.uuid])).status_code
            == 403
        )
        assert (
            client.post(reverse(f"experiments:{name}", args=[fio_matrix.uuid])).status_code == 302
        )
    assert (
        bob_client.get(reverse("experiments:matrix_edit", args=[fio_matrix.uuid])).status_code
        == 403
    )
    assert (
        alice_client.get(reverse("experiments:matrix_export", args=[fio_matrix.uuid])).status_code
        == 200
    )
    assert alice_client.get(reverse("experiments:matrix_list")).status_code == 200


def test_yaml_import_page(alice_client, bench):
    text = (
        "name: imported\ntool: fio\ntestbeds: [bench]\nrepetitions: 1\n"
        "params: {size: 4m}\naxes: {rw: [write]}\n"
    )
    response = alice_client.post(reverse("experiments:matrix_import"), {"text": text})
    assert response.status_code == 302
    assert Matrix.objects.get(name="imported").repetitions == 1
    bad = alice_client.post(reverse("experiments:matrix_import"), {"text": "tool: [x"})
    assert "not valid YAML" in bad.content.decode()


def test_localhost_node_queue_matches_the_worker(alice, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    from experiments.inventory.localhost import ensure_localhost_testbed

    testbed = ensure_localhost_testbed(alice)
    assert ensure_localhost_testbed(alice).pk == testbed.pk
    node = Node.objects.get(memberships__testbed=testbed)
    assert node.hostname == socket.gethostname()
    matrix = Matrix.objects.create(
        owner=alice, name="local", tool="dd", fixed_params={"count": 4, "bs": "1m"}, repetitions=1
    )
    matrix.testbeds.set([testbed])
    expand(matrix)
    assert matrix.runs.get().queue == f"node.{socket.gethostname()}"


def test_progress_of_a_large_matrix_lists_what_needs_attention(
    alice_client, fio_matrix, monkeypatch, django_assert_max_num_queries
):
    from experiments.views import matrices as views

    monkeypatch.setattr(views, "TABLE_LIMIT", 5)
    expand(fio_matrix)
    fio_matrix.runs.filter(repetition__gt=1).update(status="succeeded")
    failed = fio_matrix.runs.filter(repetition=1).first()
    Run.objects.filter(pk=failed.pk).update(status="failed", error="dd exited with 1")
    with django_assert_max_num_queries(12):
        part = alice_client.get(reverse("experiments:matrix_progress", args=[fio_matrix.uuid]))
    text = part.content.decode()
    assert text.count('<tr id="run-') == 5
    # The failed run first, then unsent ones in the order they are sent; the rest is one
    # link away (the runs table of the matrix lists every run).
    unsent = fio_matrix.runs.filter(repetition=1).exclude(pk=failed.pk).order_by("pk")[:4]
    listed = re.findall(r'<tr id="run-([0-9a-f-]+)">', text)
    assert listed == [str(failed.uuid), *(str(r.uuid) for r in unsent)]
    assert "dd exited with 1" in text and "19 more runs are not listed here" in text
    assert f'href="/runs/table/?matrix={fio_matrix.uuid}"' in text


def test_rerun_failed_queues_only_failed_and_cancelled_runs(
    fio_matrix, django_capture_on_commit_callbacks
):
    expand(fio_matrix)
    runs = list(fio_matrix.runs.order_by("pk"))
    Run.objects.filter(pk__in=[r.pk for r in runs[2:]]).update(status="succeeded")
    Run.objects.filter(pk=runs[0].pk).update(status="failed", error="fio exited with 1")
    Run.objects.filter(pk=runs[1].pk).update(status="cancelled")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert rerun_failed(fio_matrix) == 2
    assert len(callbacks) == 1
    assert set(fio_matrix.runs.values_list("status", flat=True)) == {"queued", "succeeded"}
    assert fio_matrix.runs.filter(status="queued").count() == 2
    # Resume sends planned and queued runs again, each with a new token.
    before = dict(fio_matrix.runs.filter(status="queued").values_list("pk", "dispatch_token"))
    with django_capture_on_commit_callbacks(execute=False):
        assert resume(fio_matrix) == 2
    after = dict(fio_matrix.runs.filter(status="queued").values_list("pk", "dispatch_token"))
    assert before.keys() == after.keys() and all(before[k] != after[k] for k in before)


def test_preview_and_expansion_queries_do_not_grow_with_cells(fio_matrix):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count(numjobs: list[int]) -> tuple[int, int]:
        fio_matrix.axes[1]["values"] = numjobs
        fio_matrix.save()
        fio_matrix.runs.all().delete()
        with CaptureQueriesContext(connection) as planned:
            plan(fio_matrix)
        with CaptureQueriesContext(connection) as expanded:
            expand(fio_matrix)
        # Inserts come in batches (SQLite's variable limit); every read is counted.
        reads = [q for q in expanded.captured_queries if q["sql"].startswith("SELECT")]
        return len(planned), len(reads)

    assert count([1, 2]) == count([1, 2, 4, 8, 16, 32, 64, 128])


def test_live_throughput_and_result_column(alice_client, fio_matrix):
    """A running fio run shows its latest ETA line's throughput on the run page and in the
    matrix's Result column; a succeeded run shows its primary throughput in display units."""
    from datetime import timedelta

    from django.utils import timezone

    from experiments.models import Metric
    from tests.helpers.samples import FIO_WRITE

    expand(fio_matrix)
    running, done, other = list(fio_matrix.runs.order_by("pk")[:3])
    Run.objects.filter(pk=running.pk).update(
        status="running", raw_output=FIO_WRITE, started_at=timezone.now() - timedelta(seconds=4)
    )
    Run.objects.filter(pk=done.pk).update(status="succeeded")
    Metric.objects.create(run=done, name="write_bw", value=1.52e9, unit="B/s", primary=True)
    Metric.objects.create(run=done, name="write_iops", value=1450.0, unit="op/s", primary=True)
    Metric.objects.create(run=done, name="write_bw", value=1.6e9, unit="B/s", iteration=1)
    Run.objects.filter(pk=other.pk).update(status="succeeded")  # no metrics: nothing shown

    live = alice_client.get(
        reverse("experiments:run_live", args=[running.uuid]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert '<p id="live-throughput">Now: <strong>write 21.0 MB/s · 20 IOPS · 57%</strong>' in live
    assert "</strong> (at 4." in live  # 4.0 s, or 4.1 s on a slow machine
    page = alice_client.get(running.get_absolute_url())
    assert "write 21.0 MB/s" in page.content.decode()

    part = alice_client.get(
        reverse("experiments:matrix_progress", args=[fio_matrix.uuid])
    ).content.decode()
    assert '<span class="live">now write 21.0 MB/s · 20 IOPS · 57%</span>' in part
    assert '<span class="result">write_bw 1.52 GB/s</span>' in part
    assert part.count('<span class="result">') == 1

    # Once it ended, the run page shows its metrics instead of a live figure.
    Run.objects.filter(pk=running.pk).update(status="failed", error="fio exited with 1")
    live = alice_client.get(reverse("experiments:run_live", args=[running.uuid])).content
    assert b"live-throughput" not in live
