"""Issue 25, finding 9: the page items that a test client can check (the browser ones are in
tests/browser/test_issue25_pages.py): the runs table's CSV header, the metric pickers' names,
published nodes kept out of one's own testbeds and the node picker's order, the matrix
preview's mpirun line against the executor's, and ``make run``'s admin password."""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from experiments.execution.attempt import Attempt
from experiments.models import HardwareProfile, Node, Testbed, TestbedNode
from tests.helpers.comparison import add_run, make_testbed

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


# --- the runs table's CSV export ------------------------------------------------------------


def test_csv_export_names_each_column_once(alice_client, alice):
    """A metric shown in its base unit (op/s) is one column, not the same header twice."""
    tb = make_testbed(alice, "meta", "x86_64", "0")
    add_run(tb, 5000.0, metric="file_create", threads=4)
    add_run(tb, 2e9, metric="write_bw", threads=4)
    r = alice_client.get(
        "/runs/table/runs.csv", {"cols": "param:threads,metric:file_create,metric:write_bw"}
    )
    header, *rows = list(csv.reader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert len(header) == len(set(header)), header
    assert header == [
        "run",
        "label",
        "param:threads",
        "metric:file_create [op/s]",
        "metric:write_bw [B/s]",
        "metric:write_bw [GB/s]",
    ]
    assert all(len(row) == len(header) for row in rows)
    by_threads = {tuple(row[3:]) for row in rows}
    assert ("5000.0", "", "") in by_threads and ("", "2000000000.0", "2") in by_threads


# --- metric pickers -------------------------------------------------------------------------


def test_metric_pickers_name_metrics_in_words(alice_client, alice):
    tb = make_testbed(alice, "names", "x86_64", "0")
    for metric in ("rc_bw", "tree_remove", "write_bw"):
        add_run(tb, 1e9, metric=metric, threads=1)
    body = alice_client.get("/compare/").content.decode()
    picker = body[body.index('<select name="metric"') :]
    picker = picker[: picker.index("</select>")]
    options = dict(re.findall(r'<option value="([^"]+)"[^>]*>([^<]+)</option>', picker))
    assert options["write_bw"] == "Write throughput (write_bw)", options
    for name in ("rc_bw", "tree_remove"):
        text = options[name]
        assert text != name and text.endswith(f"({name})"), options
        assert not text.startswith(name), options
    # The runs table's metric column picker too (its options name the metric in words).
    body = alice_client.get("/runs/table/", {"cols": "param:threads"}).content.decode()
    picker = body[body.index('id="rt-add-metric"') :]
    picker = picker[: picker.index("</select>")]
    options = dict(re.findall(r'<option value="([^"]+)"[^>]*>([^<]+)</option>', picker))
    assert options["metric:tree_remove"] == "Tree removals (tree_remove)", options
    assert options["metric:rc_bw"] != "rc_bw" and options["metric:rc_bw"].endswith("(rc_bw)")


# --- published nodes and the node picker ----------------------------------------------------


@pytest.fixture
def published_world(alice):
    call_command("load_published", verbosity=0)
    alice.is_staff = True  # the admin of `make run` is staff: even staff may not take them
    alice.save(update_fields=["is_staff"])
    own = Testbed.objects.create(owner=alice, name="own bed")
    profile = HardwareProfile.objects.create(owner=alice, name="own box")
    mine = [
        Node.objects.create(owner=alice, hostname=f"zz-mine-{i}", profile=profile) for i in (1, 2)
    ]
    return own, mine


def test_a_published_node_cannot_join_ones_own_testbed(alice_client, published_world):
    own, _ = published_world
    published = Node.objects.filter(published=True).first()
    url = f"/testbeds/{own.uuid}/member/new/"
    r = alice_client.post(url, {"node": published.pk, "client": "on"})
    assert r.status_code in (200, 400), r.status_code  # the form again, with the error
    assert not TestbedNode.objects.filter(testbed=own, node=published).exists()
    assert "is a published node" in r.content.decode()
    # Nor through the API.
    r = alice_client.post(
        f"/api/testbeds/{own.uuid}/members/",
        {"node": str(published.uuid), "client": True},
        content_type="application/json",
    )
    assert 400 <= r.status_code < 500, r.content
    assert "published node" in r.json()["node"][0]
    assert not TestbedNode.objects.filter(testbed=own, node=published).exists()


def test_the_node_picker_lists_ones_own_nodes_first_and_no_published_ones(
    alice_client, published_world
):
    own, mine = published_world
    body = alice_client.get(f"/testbeds/{own.uuid}/member/new/").content.decode()
    picker = body[body.index('name="node"') :]
    picker = picker[: picker.index("</select>")]
    options = [t for v, t in re.findall(r'<option value="(\d+)"[^>]*>([^<]+)</option>', picker)]
    assert options[:2] == ["zz-mine-1 (alice)", "zz-mine-2 (alice)"], options[:5]
    assert not any("(published)" in t for t in options), options


# --- the preview's mpirun line --------------------------------------------------------------


def test_the_preview_shows_the_mpirun_line_the_executor_runs(alice, monkeypatch, tmp_path):
    """An MPI tool's preview is the argv the worker builds, --allow-run-as-root included
    (beeweb's workers usually run as root, and Open MPI refuses root without it)."""
    from experiments.execution import execute
    from experiments.matrices.launching import launch_spec
    from experiments.matrices.preview import plan
    from experiments.models import Matrix, Run
    from runners.tools.base import ParamError

    tb = make_testbed(alice, "mpi-bed", "x86_64", "0")
    tb.benchmark_dir = "/mnt/beegfs/bench"
    tb.save(update_fields=["benchmark_dir"])
    matrix = Matrix.objects.create(
        owner=alice,
        name="ior",
        tool="ior",
        launch_mode="mpi",
        fixed_params={"block_size": "16m", "transfer_size": "1m"},
        axes=[],
    )
    matrix.testbeds.set([tb])
    (cell,) = plan(matrix).cells
    assert not cell.error, cell.error
    preview = cell.argv
    assert "mpirun" in preview[0]

    built = []
    for euid in (0, 1000):  # the worker as root, and as an ordinary user
        monkeypatch.setattr(execute.os, "geteuid", lambda euid=euid: euid)
        run = Run(
            tool="ior", params=cell.cell.tool_params, launch=launch_spec(matrix, cell.cell)[0]
        )
        from runners.tools import get_adapter

        adapter = get_adapter("ior")
        real_build = adapter.build

        def capture(params, ctx, real_build=real_build):
            built.append(real_build(params, ctx).argv)
            raise ParamError("context", "stop: captured")

        monkeypatch.setattr(adapter, "build", capture)
        monkeypatch.setattr(execute, "get_adapter", lambda tool, adapter=adapter: adapter)
        status, *_ = execute._run_in(
            Attempt(run, token="", worker="w@test"), tmp_path / "run", tmp_path / "scratch"
        )
        assert status == Run.Status.FAILED

    def shape(argv):  # the run's directory and scratch are only known when it starts
        return [re.sub(r"^/.*/", "/…/", a) for a in argv]

    assert "--allow-run-as-root" in preview
    for argv in built:
        assert shape(argv) == shape(preview), (argv, preview)


# --- make run: the admin password at the end ------------------------------------------------


def _stub(path: Path, text: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + text)
    path.chmod(0o755)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_make_run_shows_the_new_admin_password_last_in_a_box(tmp_path):
    """scripts/run-local.sh (the end of `make run`) creates the admin and shows its password
    in a box as the last thing before serving; the workers and gunicorn are stubs here that
    print what they would (the real ones log to var/ or stay quiet)."""
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    _stub(venv / "python", f'exec "{sys.executable}" "$@"\n')
    _stub(venv / "celery", "echo 'celery started' ; sleep 30\n")
    _stub(venv / "gunicorn", "echo '[INFO] Starting gunicorn' ; exit 0\n")
    data = tmp_path / "data"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}
        and not k.startswith("BEEWEB_ADMIN")
    }
    env.update(BEEWEB_DATA_DIR=str(data), VENV=str(tmp_path / "venv"), PORT="8999")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    done = subprocess.run(
        ["bash", "scripts/run-local.sh"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout
    assert done.returncode == 0, done.stderr
    lines = [line for line in out.splitlines() if line.strip()]
    password = re.search(r"password:\s+(\S+)", out)
    assert password, out
    # The box: a frame line above and below the credentials, the URL inside it.
    box = [i for i, line in enumerate(lines) if re.fullmatch(r"\s*[+=#*-]{20,}\s*", line)]
    assert len(box) >= 2, out
    inside = "\n".join(lines[box[0] : box[-1] + 1])
    assert "password:" in inside and "http://127.0.0.1:8999/" in inside
    assert "user:" in inside and "admin" in inside
    # Nothing of the start-up comes after it but gunicorn's own line.
    after = lines[box[-1] + 1 :]
    assert all("gunicorn" in line for line in after), after
    # A second start: the admin exists; the box says how to sign in without the password.
    again = subprocess.run(
        ["bash", "scripts/run-local.sh"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert password.group(1) not in again
    assert "changepassword" in again and "http://127.0.0.1:8999/" in again
