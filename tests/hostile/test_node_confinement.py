"""Finding 1 (the node's half) and finding 2 (sysctls): a worker confines runs by its own
configuration, whatever the server stored. Real Celery workers run real dd and a stand-in for
mdtest (not installable here) that creates its -d directory and prints a real mdtest output.

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
import shutil
import socket
import sys
from pathlib import Path

import pytest

from tests.helpers.samples import SAMPLES
from tests.labs import Stack, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("dd") is None, reason="dd is not installed"),
]
HOST = socket.gethostname()
QUEUE = f"node.{HOST}"
MDTEST_SAMPLE = SAMPLES / "mdtest" / "mdtest-3.3.0-64tasks-4nodes-3iter-lustre-azure.txt"
DIRTY = Path("/proc/sys/vm/dirty_ratio")

# The stand-in for mdtest: creates its -d directory (as mdtest does, failing when it exists),
# records what it saw, prints the sample. -n 13 fails like a broken file system; -n 99 runs
# until it is killed (to be cancelled).
FAKE_MDTEST = """\
#!{python}
import os, sys, time
args = sys.argv[1:]
directory = args[args.index("-d") + 1]
items = args[args.index("-n") + 1]
os.mkdir(directory)
open(os.path.join(directory, "file.0"), "w").write("mdtest file\\n")
with open(os.environ["FAKE_SEEN"], "a") as seen:
    ratio = open("/proc/sys/vm/dirty_ratio").read().strip()
    seen.write(f"{{items}} {{directory}} {{ratio}}\\n")
if items == "13":
    print("mdtest: file create failed", file=sys.stderr)
    sys.exit(1)
if items == "99":
    time.sleep(120)
sys.stdout.write(open({sample!r}).read())
"""

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
timeout_s: 120
params: {{iterations: 1}}
axes:
  items: {items}
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    if not MDTEST_SAMPLE.exists():
        pytest.skip(f"no mdtest sample at {MDTEST_SAMPLE} (set BEEWEB_SAMPLES_DIR)")
    tmp = tmp_path_factory.mktemp("confinement")
    s = Stack(tmp)
    s.env.pop("BEEWEB_NODE_DIRS", None)  # the defaults: the data directory, no tuning
    s.env.pop("BEEWEB_NODE_TUNING", None)
    s.manage("ensure_localhost")
    fake = tmp / "bin"
    fake.mkdir()
    (fake / "mdtest").write_text(
        FAKE_MDTEST.format(python=sys.executable, sample=str(MDTEST_SAMPLE))
    )
    (fake / "mdtest").chmod(0o755)
    s.env["PATH"] = f"{fake}:{os.environ['PATH']}"
    s.env["FAKE_SEEN"] = str(tmp / "seen.txt")
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


def launch(stack: Stack, tmp: Path, text: str, wait: bool = True) -> None:
    path = tmp / "matrix.yaml"
    path.write_text(text)
    args = ["launch_matrix", str(path)] + (["--wait", "--timeout", "120"] if wait else [])
    result = stack.manage(*args, check=False, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr


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
    Path(stack.env["FAKE_SEEN"]).unlink(missing_ok=True)

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
    seen = Path(stack.env["FAKE_SEEN"]).read_text().split()
    assert seen[1] == f"{mdtest['config']['run_dir']}/mdtest"  # mdtest's -d, made by itself
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
    seen_file = Path(stack.env["FAKE_SEEN"])
    seen_file.unlink(missing_ok=True)

    # BEEWEB_NODE_TUNING unset: nothing is applied.
    first = worker("confine-c1")
    launch(stack, tmp_path, TUNED.format(name="untuned", tuning="dirty", items="[10]"))
    (run,) = runs(stack, "untuned")
    assert run["status"] == "succeeded", run["error"]
    assert run["config"]["applied"] == [
        {
            "key": "os.vm.dirty_ratio",
            "value": wanted,
            "result": "refused: this node's BEEWEB_NODE_TUNING does not allow it",
        }
    ]
    assert seen_file.read_text().split()[2] == dirty_ratio, "unchanged during the run"
    assert DIRTY.read_text().strip() == dirty_ratio
    seen_file.unlink()
    stack.stop(first)  # one worker per node queue at a time

    # Allowed: applied during each run, restored after it, whether it succeeds, fails or is
    # cancelled.
    worker("confine-c2", BEEWEB_NODE_TUNING="os.vm.dirty_ratio,striping.chunksize")
    launch(stack, tmp_path, TUNED.format(name="tuned", tuning="dirty", items="[10, 13, 99]"), False)

    def sleeping() -> bool:
        return seen_file.exists() and "99" in seen_file.read_text().split()

    assert wait_for(sleeping, 90), stack.worker_log(f"confine-c2@{HOST}")
    stack.shell(
        "from experiments.matrices.expansion import cancel_runs;"
        " from experiments.models import Run\n"
        "print(cancel_runs(Run.objects.filter(matrix__name='tuned', params__items=99)))"
    )
    assert wait_for(lambda: finished(stack, "tuned"), 90)
    results = {r["params"]["items"]: r for r in runs(stack, "tuned")}
    assert [results[n]["status"] for n in (10, 13, 99)] == ["succeeded", "failed", "cancelled"]
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
    seen = [line.split() for line in seen_file.read_text().splitlines()]
    assert sorted((items, ratio) for items, _, ratio in seen) == [
        ("10", wanted),
        ("13", wanted),
        ("99", wanted),
    ]
    assert DIRTY.read_text().strip() == dirty_ratio, "restored after the runs"
    assert os.listdir(bench) == []
