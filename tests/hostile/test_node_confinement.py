"""Finding 1 (the node's half) and finding 2 (sysctls): a worker confines runs by its own
configuration, whatever the server stored. Real Celery workers run real dd and the real mdtest
4.0.0 (built from ../shared/tools/ior by .ci/run; the module skips, saying why, without it).

- dd and mdtest runs never touch a file or directory that existed before them: each run works
  in a fresh directory of its own and the executor removes only that directory.
- A run whose directory resolves outside the worker's BEEWEB_NODE_DIRS (``/``, ``/etc``, a
  symlink to ``/etc``) fails with a clear error before its tool starts, even when the server
  sent it there.
- OS tuning is applied only when the worker's BEEWEB_NODE_TUNING allows the key, and every
  value applied is restored after the run, also when the tool fails or is cancelled.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
from pathlib import Path

import pytest

from tests.helpers.ior import need_ior
from tests.labs import Stack, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("dd") is None, reason="dd is not installed"),
]
HOST = socket.gethostname()
QUEUE = f"node.{HOST}"
DIRTY = Path("/proc/sys/vm/dirty_ratio")

# The real mdtest's three outcomes: a short run that succeeds; one that fails (the read phase
# alone, on files never created: mdtest aborts, exit 255); one long enough to be cancelled
# while it creates files (millions of them: minutes at this machine's rates).
SHORT = "{items: 10, iterations: 1}"
FAILING = "{items: 10, phases: [read], write_bytes: 8, read_bytes: 8}"
LONG = "{items: 5000000, files_only: true, phases: [create]}"

DD_AND_MDTEST = """\
name: {name}
tool: {tool}
testbeds: [localhost]
repetitions: 1
drop_caches: false
timeout_s: 120
params: {params}
"""

TUNED = """\
name: {name}
tool: mdtest
testbeds: [localhost]
tuning_sets: [{tuning}]
apply_tuning: true
repetitions: 1
drop_caches: false
timeout_s: 300
params: {params}
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    need_ior("mdtest")
    tmp = tmp_path_factory.mktemp("confinement")
    s = Stack(tmp)
    s.env.pop("BEEWEB_NODE_DIRS", None)  # the defaults: the data directory, no tuning
    s.env.pop("BEEWEB_NODE_TUNING", None)
    s.manage("ensure_localhost")
    yield s
    s.close()


@pytest.fixture
def bench(stack) -> Path:
    """The localhost testbed's benchmark directory, $BEEWEB_DATA_DIR/bench, emptied."""
    path = Path(stack.env["BEEWEB_DATA_DIR"]) / "bench"
    for entry in path.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return path


@pytest.fixture
def worker(stack, request):
    """Start a worker on this host's queue with extra environment; stopped after the test."""
    started = []

    def start(name: str, **env: str):
        proc = stack.worker(QUEUE, f"{name}@{HOST}", env=env)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        stack.stop(proc)


def launch(stack: Stack, tmp: Path, text: str, wait: bool = True, fails: bool = False) -> None:
    """Launch the matrix ``text`` (and wait for it); ``launch_matrix --wait`` exits 1 when a
    run fails, as a matrix that ``fails`` should."""
    path = tmp / "matrix.yaml"
    path.write_text(text)
    args = ["launch_matrix", str(path)] + (["--wait", "--timeout", "120"] if wait else [])
    result = stack.manage(*args, check=False, timeout=180)
    assert result.returncode == (1 if fails else 0), result.stdout + result.stderr


def runs(stack: Stack, matrix: str) -> list[dict]:
    return json.loads(
        stack.shell(
            "import json; from experiments.models import Run\n"
            f"qs = Run.objects.filter(matrix__name={matrix!r}).order_by('id')\n"
            "print(json.dumps([dict(id=r.pk, status=r.status, error=r.error, argv=r.argv,"
            " raw=r.raw_output, exit_code=r.exit_code, config=r.effective_config,"
            " params=r.params, launch=r.launch) for r in qs]))"
        )
    )


def finished(stack: Stack, matrix: str) -> bool:
    return all(r["status"] in ("succeeded", "failed", "cancelled") for r in runs(stack, matrix))


def snapshot(path: Path) -> dict[str, tuple]:
    """Every entry under ``path`` (itself included) with its type, mtime and content hash."""
    entries = {}
    for entry in [path, *sorted(path.rglob("*"))]:
        st = entry.lstat()
        digest = hashlib.sha256(entry.read_bytes()).hexdigest() if entry.is_file() else ""
        entries[str(entry.relative_to(path))] = (entry.is_dir(), st.st_mtime_ns, digest)
    return entries


def test_dd_and_mdtest_never_touch_what_was_there(stack, bench, worker, tmp_path):
    """Finding 1: the worker used to write dd's file and remove mdtest's directory in place."""
    victim = bench / "dd.tmp"
    victim.write_bytes(b"not beeweb's data\n" * 1000)
    md = bench / "mdtest"
    md.mkdir()
    (md / "keep.txt").write_text("not beeweb's either\n")
    os.utime(victim, ns=(10**18, 10**18))  # a fixed past mtime: any write would move it
    os.utime(md / "keep.txt", ns=(10**18, 10**18))
    os.utime(md, ns=(10**18, 10**18))
    before = {name: value for name, value in snapshot(bench).items() if name != "."}

    worker("confine-a")
    for name, tool, params in (
        ("dd write", "dd", "{bs: 1m, count: 4, fdatasync: true}"),
        ("dd read", "dd", "{direction: read, bs: 1m, count: 4}"),
        ("mdtest", "mdtest", "{items: 10}"),
    ):
        launch(stack, tmp_path, DD_AND_MDTEST.format(name=name, tool=tool, params=params))

    dd_write, dd_read, mdtest = (runs(stack, n)[0] for n in ("dd write", "dd read", "mdtest"))
    for run in (dd_write, dd_read, mdtest):
        assert run["status"] == "succeeded", run["error"] + run["raw"]
    after = {name: value for name, value in snapshot(bench).items() if name != "."}
    assert after == before, "the files that were there are untouched (content and mtime)"
    assert sorted(os.listdir(bench)) == ["dd.tmp", "mdtest"], "and nothing is left behind"

    # Each run worked in a fresh directory of its own inside the benchmark directory.
    run_dir = dd_write["config"]["run_dir"]
    assert Path(run_dir).parent == bench and Path(run_dir).name.startswith("beeweb-run-")
    assert dd_write["argv"][2] == f"of={run_dir}/dd.tmp"
    assert dd_read["argv"][1] == f"if={dd_read['config']['run_dir']}/dd.tmp"
    (prepare,) = dd_read["config"]["prepare"]
    assert prepare["argv"][-1] == "conv=excl,fsync" and prepare["exit_code"] == 0
    md_dir = f"{mdtest['config']['run_dir']}/mdtest"  # mdtest's -d, made by itself
    assert mdtest["argv"][-2:] == ["-d", md_dir]
    assert re.search(rf"^Path\s*: {re.escape(md_dir)}$", mdtest["raw"], re.M), mdtest["raw"]
    assert not (Path(stack.env["BEEWEB_DATA_DIR"]) / "runs").exists() or not any(
        (Path(stack.env["BEEWEB_DATA_DIR"]) / "runs").iterdir()
    ), "scratch directories are removed too"


def test_runs_outside_the_nodes_directories_fail_before_their_tool_starts(
    stack, bench, worker, tmp_path
):
    """Finding 1: with benchmark directory / the preview showed dd of=/etc/shadow. The server
    now refuses such paths too; here the server is taken to be wrong (the runs' stored launch
    is rewritten after expansion), and the worker still refuses them."""
    escape = bench / "escape"
    escape.symlink_to("/etc")
    launch(
        stack,
        tmp_path,
        DD_AND_MDTEST.format(name="escape", tool="dd", params="{bs: 4k, count: 1}").replace(
            "repetitions: 1", "repetitions: 3"
        ),
        wait=False,
    )
    workdirs = ["/", "/etc", str(escape)]
    stack.shell(
        "from experiments.models import Run\n"
        f"for run, workdir in zip(Run.objects.filter(matrix__name='escape').order_by('id'), "
        f"{workdirs!r}):\n"
        "    Run.objects.filter(pk=run.pk).update(launch={**run.launch, 'workdir': workdir})"
    )
    worker("confine-b", BEEWEB_NODE_DIRS=str(bench))
    assert wait_for(lambda: finished(stack, "escape"), 60), stack.worker_log(f"confine-b@{HOST}")

    shown = {"/": "/", "/etc": "/etc", str(escape): f"{escape} (resolves to /etc)"}
    results = runs(stack, "escape")
    assert [r["launch"]["workdir"] for r in results] == workdirs
    for run in results:
        assert run["status"] == "failed"
        assert run["error"] == (
            f"refused: the benchmark directory {shown[run['launch']['workdir']]} is outside "
            f"this node's BEEWEB_NODE_DIRS ({bench}); nothing was started"
        )
        # No process started: no output, no exit status, no node configuration recorded.
        assert run["raw"] == "" and run["exit_code"] is None and run["config"] == {}
    for directory in ("/", "/etc"):
        assert not [p for p in os.listdir(directory) if p.startswith("beeweb-run-")]
    assert sorted(os.listdir(bench)) == ["escape"]


@pytest.fixture
def dirty_ratio():
    """vm.dirty_ratio as it was, put back after the test whatever happens."""
    if not os.access(DIRTY, os.W_OK):
        pytest.skip("/proc/sys/vm/dirty_ratio is not writable here (needs root)")
    before = DIRTY.read_text().strip()
    yield before
    DIRTY.write_text(before + "\n")


def test_tuning_only_where_the_node_allows_it_and_restored_after(
    stack, bench, worker, tmp_path, dirty_ratio
):
    """Finding 2: apply_tuning changed sysctls on the host that stayed changed."""
    wanted = "17" if dirty_ratio != "17" else "18"
    stack.shell(
        "from django.contrib.auth import get_user_model\n"
        "from experiments.models import TuningParameter, TuningSet\n"
        "owner = get_user_model().objects.get(is_superuser=True)\n"
        "tuning = TuningSet.objects.create(owner=owner, name='dirty')\n"
        f"TuningParameter.build(tuning, 'os', 'vm.dirty_ratio', {wanted!r}).save()\n"
        "tuning.refresh_effective()"
    )

    def long_run_under_way(matrix: str) -> str:
        """Wait until the long run's mdtest is creating its files; the ratio in force then."""
        first = "beeweb-run-*/mdtest/test-dir.0-0/mdtest_tree.0/file.mdtest.0.0"
        assert wait_for(lambda: any(bench.glob(first)), 90), runs(stack, matrix)
        return DIRTY.read_text().strip()

    def cancel(matrix: str) -> None:
        stack.shell(
            "from experiments.matrices.expansion import cancel_runs;"
            " from experiments.models import Run\n"
            f"print(cancel_runs(Run.objects.filter(matrix__name={matrix!r})))"
        )
        assert wait_for(lambda: finished(stack, matrix), 90)

    # BEEWEB_NODE_TUNING unset: nothing is applied.
    first = worker("confine-c1")
    launch(stack, tmp_path, TUNED.format(name="untuned", tuning="dirty", params=SHORT))
    launch(stack, tmp_path, TUNED.format(name="untuned long", tuning="dirty", params=LONG), False)
    assert long_run_under_way("untuned long") == dirty_ratio, "unchanged during the run"
    cancel("untuned long")
    for matrix, status in (("untuned", "succeeded"), ("untuned long", "cancelled")):
        (run,) = runs(stack, matrix)
        assert run["status"] == status, run["error"] + run["raw"][-2000:]
        assert run["config"]["applied"] == [
            {
                "key": "os.vm.dirty_ratio",
                "value": wanted,
                "result": "refused: this node's BEEWEB_NODE_TUNING does not allow it",
            }
        ]
    assert DIRTY.read_text().strip() == dirty_ratio
    stack.stop(first)  # one worker per node queue at a time

    # Allowed: applied during each run, restored after it, whether it succeeds, fails or is
    # cancelled.
    worker("confine-c2", BEEWEB_NODE_TUNING="os.vm.dirty_ratio,striping.chunksize")
    launch(stack, tmp_path, TUNED.format(name="tuned", tuning="dirty", params=SHORT))
    launch(
        stack,
        tmp_path,
        TUNED.format(name="tuned failing", tuning="dirty", params=FAILING),
        fails=True,
    )
    launch(stack, tmp_path, TUNED.format(name="tuned long", tuning="dirty", params=LONG), False)
    assert long_run_under_way("tuned long") == wanted, "in force during the run"
    cancel("tuned long")
    results = {name: runs(stack, name)[0] for name in ("tuned", "tuned failing", "tuned long")}
    assert [r["status"] for r in results.values()] == ["succeeded", "failed", "cancelled"]
    assert results["tuned failing"]["error"] == "mdtest exited with 255"
    assert "No such file or directory" in results["tuned failing"]["raw"]
    for run in results.values():
        assert run["config"]["applied"] == [
            {
                "key": "os.vm.dirty_ratio",
                "value": wanted,
                "before": dirty_ratio,
                "path": str(DIRTY),
                "result": "applied",
                "restored": "restored",
            }
        ]
    assert DIRTY.read_text().strip() == dirty_ratio, "restored after the runs"
    assert os.listdir(bench) == []
