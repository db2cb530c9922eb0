"""Celery dispatch: 1,000 trivial runs (dd, bs=4k count=1, no cache drop) of a matrix on the
localhost testbed, through the real broker (Redis) and one real solo-pool worker on
``node.<hostname>`` running the real executor (experiments/execution/execute.py). Target: <= 60 s
from launch until every run has finished.

    .venv/bin/python bench/dispatch.py [--runs 1000] [--profile | --phases]

The per-run figure of the main mode is the median time from one run's end to the next's (the
steady state, without the launch and the worker's start; issue 17 asks for at most 15 ms,
issue 30 for 6 ms). Prints the worker's RSS after the load (see memory.py for web + worker
together), and the floor: the same dd spawned and two rows stored by plain psycopg.

``--profile`` instead runs 50 of them in this process through
``experiments.execution.execute.execute`` (as the Celery task does): CPU time, queries and
durable commits per run, which the shared machine's load does not change, then 50 more under
cProfile, printing where a run's time goes. ``--phases`` runs up to 400 of them in this
process and prints each step's median time (the claim, the run's directory, the node's
configuration, the tool, the raw output, the outcome: ``PHASES``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402


def make_matrix(runs: int):
    from django.contrib.auth import get_user_model

    from experiments.inventory.localhost import ensure_localhost_testbed
    from experiments.models import Matrix

    user, _ = get_user_model().objects.get_or_create(username="bench")
    testbed = ensure_localhost_testbed(user)
    files = 10 if runs >= 10 else 1
    matrix = Matrix.objects.create(
        owner=user,
        name=f"dispatch bench {time.strftime('%H:%M:%S')}",
        tool="dd",
        fixed_params={"bs": "4k", "count": 1},
        drop_caches=False,
        timeout_s=60,
        axes=[{"param": "file", "values": [f"dd{i}.tmp" for i in range(files)]}],
        repetitions=max(1, runs // files),
    )
    matrix.testbeds.add(testbed)
    return matrix


def _write(sql: str) -> bool:
    return sql.lstrip().split(" ", 1)[0].upper() in {"INSERT", "UPDATE", "DELETE", "COPY"}


def durable_commits(queries: list[dict]) -> int:
    """Commits that wrote (each waits for the WAL to reach the disk): every COMMIT of a
    transaction that wrote, and every write outside a transaction (autocommit); not a
    transaction that set ``synchronous_commit = off``, by SET LOCAL or, in one statement, by
    set_config (its flush is left to the next synchronous commit)."""
    commits = 0
    in_tx = wrote = False
    unflushed = False
    for query in queries:
        sql = query["sql"].lstrip().upper()
        if sql.startswith("BEGIN"):
            in_tx, wrote, unflushed = True, False, False
        elif sql.startswith("SET LOCAL SYNCHRONOUS_COMMIT = OFF"):
            unflushed = True
        elif sql.startswith("COMMIT"):
            commits += wrote and not unflushed
            in_tx = False
        elif sql.startswith("ROLLBACK"):
            in_tx = False
        elif _write(sql) or "FOR UPDATE" in sql or sql.startswith("WITH"):  # a lock writes too
            if in_tx:
                wrote = True
            elif "SET_CONFIG('SYNCHRONOUS_COMMIT', 'OFF', TRUE)" not in sql:
                commits += 1
    return commits


def _reaper_pid() -> int | None:
    """The worker's reaper process (runners.reaper), where there is one."""
    try:
        from runners.reaper import reaper
    except ImportError:
        return None
    try:
        return reaper().pid
    except (AttributeError, TypeError):
        return None  # an older runners.reaper (a shim per run, counted as our children)


def _ticks(pid: int, children: bool = False) -> float:
    """CPU seconds of a process (with its reaped children's)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    used = int(fields[11]) + int(fields[12])
    if children:
        used += int(fields[13]) + int(fields[14])
    return used / os.sysconf("SC_CLK_TCK")


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and all its descendants, living or reaped."""
    total, pids = 0.0, [pid]
    while pids:
        current = pids.pop()
        try:
            total += _ticks(current, children=True)
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except (OSError, IndexError):
            continue
        pids.extend(int(child) for child in children)
    return total


def switches(pid: int) -> int:
    """Voluntary context switches of every thread of a process: each is a wait for another
    process (the database, the reaper, a tool) or thread, and on a loaded machine each
    costs a turn in the run queue."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def _cpu(backend: int, helper: int | None) -> dict[str, float]:
    """CPU seconds so far of everything a run uses on this machine: this process and the
    processes it started (a per-run shim and its tool), its PostgreSQL backend, and the
    reaper with the tools it started."""
    times = os.times()
    used = {
        "executor": times.user + times.system,
        "its children": times.children_user + times.children_system,
        "PostgreSQL backend": _ticks(backend),
    }
    if helper:
        used["reaper and tools"] = _ticks(helper, children=True)
    return used


def worker_backends() -> dict[int, float]:
    """CPU seconds so far of every other PostgreSQL backend of the bench database (the
    worker's sessions: its executor, node agent and heartbeat thread)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        pids = [pid for (pid,) in cursor.fetchall()]
    used = {}
    for pid in pids:
        try:
            used[pid] = _ticks(pid)
        except OSError:
            continue
    return used


def profile(
    n: int, without_summaries: bool = False, cpu_profile: bool = False, sort: str = "cumulative"
) -> None:
    """Where a run's time goes, in this process: CPU time, queries and durable commits per
    run (figures the machine's load does not change), then cProfile's breakdown.
    ``without_summaries``: the configuration summaries' refresh is skipped (for accounting
    only: what the rest of a run costs); ``cpu_profile``: cProfile counts CPU time
    (time.thread_time) instead of wall time, which a loaded machine inflates."""
    import cProfile
    import pstats
    import uuid

    if without_summaries:
        from experiments.results import summaries

        summaries._refresh = lambda run_ids, keys: None
        print("(configuration summaries NOT refreshed: accounting of the rest only)")

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from experiments.execution.execute import execute
    from experiments.matrices.adaptive import after_run
    from experiments.matrices.expansion import expand
    from experiments.models import Run

    matrix = make_matrix(2 * n)
    expand(matrix)
    runs = list(matrix.runs.all())[: 2 * n]
    for run in runs:
        token = uuid.uuid4()
        Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED, dispatch_token=token)
        run.dispatch_token = token

    def one(run) -> None:
        # What the Celery task does (experiments/execution/tasks.py).
        if execute(run.pk, str(run.dispatch_token), "profile") != "stale":
            after_run(run.pk)

    one(runs[0])  # warm: imports, the reaper, the tool's version
    plain = runs[1:n]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    helper = _reaper_pid()
    watched = [os.getpid(), backend, *([helper] if helper else [])]
    with CaptureQueriesContext(connection) as captured:
        waits = sum(switches(pid) for pid in watched)
        before = _cpu(backend, helper)
        wall = time.perf_counter()
        for run in plain:
            one(run)
        wall = time.perf_counter() - wall
        after = _cpu(backend, helper)
        waits = sum(switches(pid) for pid in watched) - waits
    count = len(plain)
    statuses = sorted(Run.objects.filter(pk__in=[r.pk for r in plain]).values_list("status"))
    if {status for (status,) in statuses} != {Run.Status.SUCCEEDED}:
        failed = Run.objects.filter(pk__in=[r.pk for r in plain]).exclude(status="succeeded")
        why = list(failed.values_list("status", "error")[:3])
        matrix.delete()  # leave the generated data set as it was
        raise SystemExit(f"not every run succeeded: {why}")
    used = {key: (after[key] - before[key]) / count * 1000 for key in after}
    print(
        f"{wall / count * 1000:.1f} ms per run in the executor (wall, load average "
        f"{os.getloadavg()[0]:.2f}); CPU per run: {sum(used.values()):.1f} ms = "
        + " + ".join(f"{value:.1f} {key}" for key, value in used.items())
        + f"; {len(captured.captured_queries) / count:.1f} queries and "
        f"{durable_commits(captured.captured_queries) / count:.1f} durable commits per run; "
        f"{waits / count:.0f} voluntary context switches per run (executor, its backend, "
        "the reaper)"
    )
    prof = cProfile.Profile(time.thread_time) if cpu_profile else cProfile.Profile()
    started = time.perf_counter()
    prof.enable()
    for run in runs[n:]:
        one(run)
    prof.disable()
    per_run = (time.perf_counter() - started) / len(runs[n:])
    print(
        f"{per_run * 1000:.1f} ms per run in the executor (wall, under cProfile; load "
        f"average {os.getloadavg()[0]:.2f}); profile of "
        + ("CPU time" if cpu_profile else "wall time")
    )
    lines = int(os.environ.get("BENCH_PROFILE_LINES", "35"))
    pstats.Stats(prof).sort_stats(sort).print_stats(lines)
    matrix.delete()


# The executor's steps timed by ``--phases``: (module, attribute, what it is). Nested steps
# are inside the ones above them (the tool inside the supervision, the outcome's statement
# inside the outcome).
PHASES = [
    ("experiments.execution.execute", "claim", "claim (BEGIN … COMMIT, durable)"),
    ("experiments.execution.execute", "_locked_run", "  the run's row, locked"),
    ("experiments.execution.holding", "try_acquire", "  its nodes held (locks, leases)"),
    ("experiments.execution.execute", "update_row", "  the run marked running"),
    ("experiments.execution.execute", "_run_dir", "the run's own directory"),
    ("runners.nodeconfig", "read", "the node's configuration (sysctls, mount, device)"),
    ("experiments.execution.execute", "_supervise", "the tool supervised"),
    ("runners.reaper.Reaper", "spawn", "  dd spawned by the reaper, until it answered"),
    ("runners.reaper.Reaper", "wait", "  its exit reported"),
    ("experiments.execution.execute", "_finish", "raw output, directories, outcome"),
    ("experiments.results.telemetry", "unsaved", "  the telemetry row and its verdict"),
    ("experiments.execution.attempt.Attempt", "update_unflushed", "  the raw output's statement"),
    ("experiments.execution.execute", "_remove_beating", "  the directories removed"),
    ("experiments.execution.execute", "parse_stored_at_once", "  the outcome"),
    ("experiments.results.store", "_parsed_fields", "    the parse"),
    ("experiments.results.store", "store_row_at_once", "    the outcome's statement"),
]


def phases(n: int) -> None:
    """Where a run's time goes, step by step: ``n`` runs in this process through
    ``execute`` (as the Celery task does), each step of ``PHASES`` timed (wall, median per
    run), beside the whole run's median."""
    import importlib
    import uuid

    from experiments.execution.execute import execute
    from experiments.matrices.adaptive import after_run
    from experiments.matrices.expansion import expand
    from experiments.models import Run

    times: dict[str, list[float]] = {label: [] for _, _, label in PHASES}

    def timed(function, label):
        def step(*args, **kwargs):
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                times[label].append(time.perf_counter() - started)

        return step

    for where, attribute, label in PHASES:
        # A module, or a class of one (its name capitalised).
        module, _, last = where.rpartition(".")
        if last[0].isupper():
            owner = getattr(importlib.import_module(module), last)
        else:
            owner = importlib.import_module(where)
        setattr(owner, attribute, timed(getattr(owner, attribute), label))

    matrix = make_matrix(n + 20)
    expand(matrix)
    runs = list(matrix.runs.all())[: n + 20]
    for run in runs:
        run.dispatch_token = uuid.uuid4()
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.QUEUED, dispatch_token=run.dispatch_token
        )
    whole = []
    for index, run in enumerate(runs):
        if index == 20:  # warm: imports, the reaper, prepared statements
            whole.clear()
            for values in times.values():
                values.clear()
        started = time.perf_counter()
        if execute(run.pk, str(run.dispatch_token), "phases") != "stale":
            after_run(run.pk)
        whole.append(time.perf_counter() - started)
    print(
        f"{statistics.median(whole) * 1000:.2f} ms per run in the executor (median of {n}, "
        f"wall; load average {os.getloadavg()[0]:.2f}); its steps, median per run:"
    )
    for _, _, label in PHASES:
        if times[label]:
            print(f"  {statistics.median(times[label]) * 1000:6.2f} ms  {label}")
    matrix.delete()


def floor(argv: list[str], runs: int) -> None:
    """The floor beside the figure, in the same run: the runs' own dd command spawned
    ``runs`` times, its output and one metric stored as two rows by plain psycopg in one
    durable transaction each (temporary tables): what a run costs without Celery, Django or
    beeweb's bookkeeping. Median per run."""
    import subprocess
    import tempfile

    import psycopg

    times = []
    scratch = tempfile.mkdtemp(prefix="dispatch-floor-", dir=common.DATA_DIR)
    # The run's own working directory is gone: the same command, writing in a scratch one.
    argv = [f"of={scratch}/dd.tmp" if a.startswith("of=") else a for a in argv]
    with psycopg.connect(common.database_url()) as conn:
        conn.execute("CREATE TEMP TABLE floor_run (id serial PRIMARY KEY, raw text)")
        conn.execute("CREATE TEMP TABLE floor_metric (run_id int, name text, value float8)")
        conn.commit()
        for _ in range(runs):
            started = time.perf_counter()
            done = subprocess.run(argv, capture_output=True, check=True)
            with conn.transaction():
                (run_id,) = conn.execute(
                    "INSERT INTO floor_run (raw) VALUES (%s) RETURNING id",
                    [done.stderr.decode()],
                ).fetchone()
                conn.execute("INSERT INTO floor_metric VALUES (%s, 'write_bw', %s)", [run_id, 1.0])
            times.append(time.perf_counter() - started)
    shutil.rmtree(scratch, ignore_errors=True)
    print(
        f"  floor: the same dd spawned and two rows stored by plain psycopg, one commit per "
        f"run, no framework: median {statistics.median(times) * 1000:.1f} ms per run "
        f"({runs:,} runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--phases", action="store_true", help="the executor's steps timed, in this process"
    )
    parser.add_argument(
        "--without-summaries",
        action="store_true",
        help="skip the configuration summaries' refresh (accounting only)",
    )
    parser.add_argument(
        "--cpu-profile", action="store_true", help="--profile: cProfile counts CPU time"
    )
    parser.add_argument(
        "--sort", default="cumulative", help="--profile: cProfile's sort key (e.g. tottime)"
    )
    args = parser.parse_args()
    common.ensure_database()
    common.setup_django()
    if args.phases:
        phases(min(args.runs, 400))
        return
    if args.profile:
        profile(min(args.runs, 50), args.without_summaries, args.cpu_profile, args.sort)
        return

    from django.db.models import Count

    from experiments.matrices.expansion import launch
    from experiments.models import Run

    matrix = make_matrix(args.runs)
    queue = f"node.{socket.gethostname()}"
    load_before = os.getloadavg()[0]
    app = "bench.worker_without_summaries" if args.without_summaries else "beeweb"
    if args.without_summaries:
        print("(the worker does NOT refresh configuration summaries: accounting only)")
    with common.celery_worker(queue, app) as worker:
        time.sleep(5)  # the worker connects to Redis and starts consuming
        cpu = tree_cpu(worker.pid)
        backends = worker_backends()
        started = time.perf_counter()
        counts = launch(matrix)
        total = counts["queued"]
        done = 0
        deadline = started + 600
        # The backends' last readings, taken while the runs go on: a session the worker
        # closes (Celery's fix-up closes them every CELERY_DB_REUSE_MAX = 1,000 tasks) is
        # gone from /proc by the end, and with it its CPU time.
        seen: dict[int, float] = {}
        while time.perf_counter() < deadline:
            done = matrix.runs.filter(status__in=Run.TERMINAL).count()
            seen.update(worker_backends())
            if done >= total:
                break
            time.sleep(0.2)
        elapsed = time.perf_counter() - started
        cpu = tree_cpu(worker.pid) - cpu
        seen.update(worker_backends())
        backends = {pid: used - backends.get(pid, 0.0) for pid, used in seen.items()}
        rss = common.rss_kib(worker.pid) / 1024
    statuses = dict(matrix.runs.values_list("status").annotate(n=Count("id")).order_by())
    spans = sorted(
        matrix.runs.exclude(finished_at=None).values_list("started_at", "finished_at"),
        key=lambda span: span[1],
    )
    ends = [end for _, end in spans]
    gaps = [(b - a).total_seconds() for a, b in zip(ends, ends[1:], strict=False)]
    # Where the time between two run ends goes: from the claim until the raw output is
    # stored (the tool and the node's readings), and from there until the next claim
    # (parsing, storing, the adaptive decision, Celery's ack and the next message).
    inside = [(end - start).total_seconds() for start, end in spans if start]
    between = [
        (b[0] - a[1]).total_seconds() for a, b in zip(spans, spans[1:], strict=False) if b[0]
    ]
    print(
        f"Celery dispatch: {done}/{total} dd runs finished in {elapsed:.1f} s "
        f"({elapsed / max(done, 1) * 1000:.0f} ms per run; statuses {statuses}) through "
        f"Redis and one solo worker on {queue} [target <= 60 s for 1,000]"
    )
    if gaps:
        print(
            f"  per run, from one run's end to the next's: median "
            f"{statistics.median(gaps) * 1000:.1f} ms [target <= 15 ms]; load average "
            f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after (2 cores, shared)"
        )
    if inside and between:
        print(
            f"  of which: claim to raw output stored, median {statistics.median(inside) * 1000:.1f}"
            f" ms; raw output stored to the next run's claim, median "
            f"{statistics.median(between) * 1000:.1f} ms"
        )
    print(
        f"  CPU of the worker and its processes (reaper, tools): "
        f"{cpu / max(done, 1) * 1000:.1f} ms per run"
    )
    print(
        f"  CPU of the PostgreSQL backends of the worker's sessions: "
        f"{sum(backends.values()) / max(done, 1) * 1000:.1f} ms per run"
    )
    print(f"celery worker RSS after the load: {rss:.0f} MB")
    failed = matrix.runs.exclude(status=Run.Status.SUCCEEDED).first()
    if failed is not None:
        print(f"  e.g. run {failed.uuid}: {failed.status} {failed.error} {failed.parse_error}")
    argv = matrix.runs.exclude(argv=[]).values_list("argv", flat=True).first()
    matrix.delete()  # leave the generated data set as it was
    if argv:
        floor(list(argv), min(args.runs, 1000))


if __name__ == "__main__":
    main()
