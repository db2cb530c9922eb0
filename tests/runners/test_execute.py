"""The executor in-process with real tools: claim, supervise, store raw output, parse; stale
and duplicate deliveries, timeouts, cancel, failing tools, and the janitor."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import OperationalError
from django.utils import timezone

from experiments.execution import dispatch as dispatching
from experiments.execution import execute
from experiments.matrices.expansion import cancel_runs
from experiments.models import NodeLease, Run
from experiments.results import summaries
from tests.helpers.execution import make_matrix, queue
from tests.helpers.ior import need_ior

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


@pytest.fixture
def bench(executing_bench):
    return executing_bench


@pytest.mark.django_db
def test_fio_runs_and_parses(alice, bench):
    matrix = make_matrix(
        alice,
        bench,
        params={"size": "4m", "bs": "1m", "rw": "write", "numjobs": 2},
        drop_caches=True,
    )
    run = matrix.runs.get()
    assert execute.execute(run.pk, queue(run), "w@test") == Run.Status.SUCCEEDED
    run.refresh_from_db()
    assert run.status == "succeeded" and run.exit_code == 0 and run.attempts == 1
    assert run.raw_output.lstrip().startswith("{")  # fio's JSON, stored as printed
    assert run.metrics.get(name="write_bw", primary=True).value > 0
    assert run.params["numjobs"] == 2 and run.params["threads"] == 2  # matrix + parser
    assert run.tool_version.startswith("fio-")
    assert summaries.differences() == [], "summaries kept in the run's store transaction"
    config = run.effective_config
    assert "vm.dirty_ratio" in config["sysctl"]
    # One outcome per node the run held: here only stor1, the node it ran on.
    (outcome,) = config["drop_caches"].values()
    assert list(config["drop_caches"]) == ["stor1"]
    assert outcome == "dropped" or outcome.startswith("not permitted")
    assert config["mount"]["mount_point"]
    assert config["run_dir"] == f"{bench.benchmark_dir}/beeweb-run-{run.uuid}-1"
    leftovers = [p.name for p in Path(bench.benchmark_dir).iterdir()]
    assert leftovers == [], "the run's own directory is removed with fio's data files"
    assert list(Path(execute.settings.RUN_DIR).iterdir()) == [], "and its scratch directory"


@pytest.mark.django_db
def test_stale_and_duplicate_deliveries_do_nothing(alice, bench):
    matrix = make_matrix(alice, bench, params={"size": "1m", "rw": "write"})
    run = matrix.runs.get()
    token = queue(run)
    assert execute.execute(run.pk, str(uuid.uuid4()), "w@test") == "stale"
    assert Run.objects.get(pk=run.pk).status == "queued"
    assert execute.execute(run.pk, token, "w@test") == "succeeded"
    assert execute.execute(run.pk, token, "w@test") == "stale"  # delivered twice
    assert Run.objects.get(pk=run.pk).attempts == 1
    assert execute.execute(987654, token, "w@test") == "stale"  # deleted run


@pytest.mark.django_db
def test_a_claim_whose_commit_went_unanswered_goes_on_in_one_attempt(alice, bench):
    """The database went away as the claim committed (a PostgreSQL restart): the commit went
    through, the worker saw an error, and Celery tried the task again with the same token. The
    retry finds the run running this process's claim with nothing started, and goes on: one
    attempt. A claim this process saw answered, whose attempt failed later (its tool may have
    started), is not taken up again: the janitor requeues it."""
    runs = make_matrix(alice, bench, tool="dd", params={"bs": "64k", "count": 4}, repetitions=2)
    lost, later = runs.runs.order_by("pk")
    token = queue(lost)
    assert execute.claim(lost.pk, token, "w@test") is not None  # committed
    execute._confirmed.pop((lost.pk, token))  # its answer "lost": the claim raised
    assert execute.execute(lost.pk, token, "w@test") == "succeeded"
    lost.refresh_from_db()
    assert (lost.status, lost.attempts) == ("succeeded", 1)
    assert lost.metrics.filter(primary=True).exists()
    assert not NodeLease.objects.exists()

    token = queue(later)
    assert execute.claim(later.pk, token, "w@test") is not None  # answered
    assert execute.execute(later.pk, token, "w@test") == "stale"
    assert Run.objects.get(pk=later.pk).attempts == 1


@pytest.mark.django_db
def test_a_database_error_before_the_tool_started_is_taken_up_by_the_retry(
    alice, bench, monkeypatch
):
    """The database goes away after the claim, before anything of the attempt started (here
    as the run's directory is made): the task fails with the database's error and Celery's
    retry takes the same attempt up again; its nodes were freed meanwhile and are held again.
    Once the tool started, the same error leaves the run to the janitor (the tool may have
    measured: it never runs twice in one attempt)."""
    run_dir = execute._run_dir
    calls = []

    def unreachable_once(run, worker):
        calls.append(run.pk)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return run_dir(run, worker)

    monkeypatch.setattr(execute, "_run_dir", unreachable_once)
    run = make_matrix(alice, bench, tool="dd", params={"bs": "64k", "count": 4}).runs.get()
    token = queue(run)
    with pytest.raises(OperationalError):
        execute.execute(run.pk, token, "w@test")
    assert not NodeLease.objects.exists()
    assert execute.execute(run.pk, token, "w@test") == "succeeded"
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("succeeded", 1)

    supervise = execute._supervise

    def unreachable_after_the_tool(attempt, *args, **kwargs):
        supervise(attempt, *args, **kwargs)
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(execute, "_supervise", unreachable_after_the_tool)
    again = make_matrix(alice, bench, tool="dd", params={"bs": "64k", "count": 4}).runs.get()
    token = queue(again)
    with pytest.raises(OperationalError):
        execute.execute(again.pk, token, "w@test")
    assert execute.execute(again.pk, token, "w@test") == "stale"
    assert Run.objects.get(pk=again.pk).attempts == 1


@pytest.mark.django_db
def test_failing_tool_keeps_its_output(alice, bench):
    # The real mdtest, asked to read files it never created, aborts (MPI_Abort: exit 255).
    need_ior("mdtest")
    params = {"items": 10, "phases": ["read"], "write_bytes": 8, "read_bytes": 8}
    matrix = make_matrix(alice, bench, tool="mdtest", params=params)
    run = matrix.runs.get()
    assert execute.execute(run.pk, queue(run), "w@test") == "failed"
    run.refresh_from_db()
    assert run.exit_code == 255
    assert "mdtest-4.0.0 was launched" in run.raw_output
    assert "No such file or directory" in run.raw_output
    assert run.error == "mdtest exited with 255"


@pytest.mark.django_db
def test_real_ior_and_mdtest_runs_store_their_metrics(alice, bench):
    need_ior("ior", "mdtest")
    cases = (
        ("ior", {"block_size": "4m", "iterations": 2, "file_per_proc": True}, "write_bw"),
        ("mdtest", {"items": 30, "files_only": True}, "file_create"),
    )
    for tool, params, headline in cases:
        matrix = make_matrix(alice, bench, tool=tool, params=params)
        run = matrix.runs.get()
        assert execute.execute(run.pk, queue(run), "w@test") == "succeeded", run.error
        run.refresh_from_db()
        assert run.tool_version == "4.0.0" and run.argv[0] == tool
        primary = run.metrics.get(name=headline, primary=True)
        assert primary.stat == "mean" and primary.value > 0 and primary.iteration is None
        assert run.params["threads"] == 1
        assert list(Path(bench.benchmark_dir).iterdir()) == []


@pytest.mark.django_db
def test_dd_read_writes_its_file_first_and_removes_everything(alice, bench):
    matrix = make_matrix(
        alice,
        bench,
        tool="dd",
        params={"direction": "read", "file": "sub/in.bin", "bs": "64k", "count": 16},
        drop_caches=True,
    )
    run = matrix.runs.get()
    assert execute.execute(run.pk, queue(run), "w@test") == "succeeded"
    run.refresh_from_db()
    (step,) = run.effective_config["prepare"]
    assert step["argv"][-1] == "conv=excl,fsync" and step["exit_code"] == 0
    assert "16+0 records out" in step["output"]  # recorded, not parsed
    assert run.argv[1] == f"if={run.effective_config['run_dir']}/sub/in.bin"
    assert run.metrics.get(name="read_bw", primary=True).value > 0
    assert list(run.effective_config["drop_caches"]) == ["stor1"]
    assert list(Path(bench.benchmark_dir).iterdir()) == []


@pytest.mark.django_db
def test_a_run_of_a_few_milliseconds_keeps_everything(alice, bench):
    """The fast path (issue 17): a dd of 4 KiB ends within the first wait, yet its command,
    the tool's pid, its telemetry (one reading at start and end) and its verdict are
    stored with its outcome, and its nodes are free again."""
    from experiments.models import NodeLease, RunTelemetry
    from experiments.results import telemetry as stored

    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1})
    run = matrix.runs.get()
    assert execute.execute(run.pk, queue(run), "w@test") == "succeeded"
    run.refresh_from_db()
    assert run.argv[0] == "dd" and run.command.startswith("dd ") and run.tool_version
    assert run.pid and run.pid != os.getpid()  # the tool's, started by the reaper
    assert run.metrics.get(name="write_bw", primary=True).value > 0
    (row,) = RunTelemetry.objects.filter(run=run)
    (doc,) = stored.for_run(run)
    assert row.samples == 1 and 0 < doc["t"][0] < 1
    verdict = (run.bottleneck, run.bottleneck_evidence)
    assert verdict[0]
    stored.refresh_verdict(run)
    assert (run.bottleneck, run.bottleneck_evidence) == verdict
    assert run.nodes_held and not NodeLease.objects.filter(run=run).exists()


@pytest.mark.django_db
def test_a_tool_that_cannot_start_fails_with_the_reason(alice, bench, monkeypatch):
    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1})
    run = matrix.runs.get()
    monkeypatch.setenv("PATH", "/nonexistent")
    assert execute.execute(run.pk, queue(run), "w@test") == "failed"
    run.refresh_from_db()
    assert run.error.startswith("could not start dd: [Errno 2]")
    assert run.exit_code == 127 and run.raw_output.startswith("could not start dd")


@pytest.mark.django_db
def test_a_run_outside_the_nodes_directories_is_refused(alice, bench, settings, tmp_path):
    settings.NODE_DIRS = str(tmp_path / "elsewhere")
    matrix = make_matrix(alice, bench, tool="dd", params={"count": 1})
    run = matrix.runs.get()
    assert execute.execute(run.pk, queue(run), "w@test") == "failed"
    run.refresh_from_db()
    assert run.error == (
        f"refused: the benchmark directory {bench.benchmark_dir} is outside this node's "
        f"BEEWEB_NODE_DIRS ({tmp_path / 'elsewhere'}); nothing was started"
    )
    assert run.raw_output == "" and run.effective_config == {} and run.exit_code is None
    assert list(Path(bench.benchmark_dir).iterdir()) == []
    assert not Path(settings.RUN_DIR).exists()


@pytest.mark.django_db
def test_a_run_never_starts_in_a_directory_it_did_not_create(alice, bench):
    matrix = make_matrix(alice, bench, tool="dd", params={"count": 1})
    run = matrix.runs.get()
    squatter = Path(bench.benchmark_dir) / f"beeweb-run-{run.uuid}-1"
    squatter.mkdir()
    (squatter / "dd.tmp").write_text("someone else's")
    assert execute.execute(run.pk, queue(run), "w@test") == "failed"
    run.refresh_from_db()
    assert run.error == (
        f"refused: could not create the run's own directory {squatter}: File exists"
    )
    assert (squatter / "dd.tmp").read_text() == "someone else's"


@pytest.mark.django_db
def test_timeout_kills_the_process_group(alice, bench):
    matrix = make_matrix(
        alice,
        bench,
        params={"rw": "write", "size": "64m", "runtime": 60, "time_based": True},
        timeout_s=2,
    )
    run = matrix.runs.get()
    assert execute.execute(run.pk, queue(run), "w@test") == "failed"
    run.refresh_from_db()
    # Ended by the timeout, not by fio's 60 s (however long the machine took to get there).
    assert run.error.startswith("timed out after 2 s")
    assert run.pid and not _alive(run.pid)


@pytest.mark.django_db
def test_janitor_requeues_then_fails_orphans(
    alice, bench, settings, django_capture_on_commit_callbacks
):
    settings.RUN_MAX_ATTEMPTS = 2
    matrix = make_matrix(alice, bench, params={"rw": "write", "size": "1m"}, repetitions=2)
    first, second = matrix.runs.order_by("repetition")
    old = timezone.now() - timedelta(minutes=10)
    Run.objects.filter(pk=first.pk).update(
        status="running",
        attempts=1,
        heartbeat_at=old,
        worker="gone@node",
        raw_output="partial output",
    )
    Run.objects.filter(pk=second.pk).update(
        status="running", attempts=2, heartbeat_at=old, worker="gone@node"
    )
    fresh = make_matrix(alice, bench, params={"rw": "read", "size": "1m"}).runs.get()
    Run.objects.filter(pk=fresh.pk).update(
        status="running", attempts=1, heartbeat_at=timezone.now()
    )
    with django_capture_on_commit_callbacks(execute=False):
        assert dispatching.janitor() == {
            "requeued": 1,
            "failed": 1,
            "cancelled": 0,
            "redispatched": 0,
        }
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == "queued" and "stopped sending heartbeats" in first.error
    assert second.status == "failed" and "gave up after 2 attempts" in second.error
    assert Run.objects.get(pk=fresh.pk).status == "running"
    # The next attempt keeps the earlier attempt's output in its history.
    execute.execute(first.pk, str(first.dispatch_token), "w2@test")
    first.refresh_from_db()
    assert first.attempts == 2 and first.status == "succeeded"
    assert first.launch["history"][0]["output_tail"] == "partial output"


@pytest.mark.django_db(transaction=True)
def test_cancel_while_running(alice, bench):
    matrix = make_matrix(
        alice,
        bench,
        params={"rw": "write", "size": "64m", "runtime": 60, "time_based": True},
        timeout_s=120,
    )
    run = matrix.runs.get()
    token = queue(run)
    result = {}

    def work() -> None:
        from django.db import connection

        try:
            result["status"] = execute.execute(run.pk, token, "w@test")
        finally:
            connection.close()  # the test database is dropped at the end

    worker = threading.Thread(target=work)
    worker.start()
    # The tool runs: its pid is written once it outlasts the executor's first wait.
    deadline = time.monotonic() + 60
    while Run.objects.get(pk=run.pk).pid is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert Run.objects.get(pk=run.pk).status == "running"
    assert cancel_runs(Run.objects.filter(pk=run.pk)) == {"cancelled": 0, "stopping": 1}
    worker.join(timeout=30)
    assert result["status"] == "cancelled"
    run.refresh_from_db()
    assert "cancelled while running" in run.error
    assert not _alive(run.pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    state = subprocess.run(
        ["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True
    ).stdout.strip()
    return bool(state) and not state.startswith("Z")


@pytest.mark.django_db(transaction=True)
def test_one_heartbeat_thread_per_worker_beats_while_a_run_holds_its_nodes(
    alice, bench, settings, monkeypatch
):
    """The worker's beater writes a heartbeat every RUN_PROGRESS_SECONDS while a run is in
    ``_beating``, none after, and is the same thread for every run (not one per run)."""
    settings.RUN_PROGRESS_SECONDS = 0.2
    run = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1}).runs.get()
    old = timezone.now() - timedelta(minutes=5)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, attempts=1, heartbeat_at=old)
    run.refresh_from_db()
    beats: list[int] = []
    beat_once = execute._beat_once
    monkeypatch.setattr(execute, "_beat_once", lambda pk, a: beats.append(pk) or beat_once(pk, a))

    def wait_until(predicate, what: str) -> None:
        deadline = time.monotonic() + 60  # only against it never happening
        while not predicate():
            assert time.monotonic() < deadline, what
            time.sleep(0.05)

    with execute._beating(run):
        beater = execute.Beater.get()
        thread = beater.thread
        wait_until(lambda: len(beats) >= 2, "two heartbeats while the run holds its nodes")
        assert Run.objects.get(pk=run.pk).heartbeat_at > old
    left = len(beats)  # a beat under way as the run left is counted here
    # The beater wakes, finds no run left and closes its database session: it had its
    # chance to beat again, and did not.
    wait_until(lambda: not beater.connected, "its database session closed while idle")
    assert len(beats) == left, "no beat once the run left"
    with execute._beating(run):
        assert execute.Beater.get().thread is thread and thread.is_alive()
    wait_until(lambda: not execute.Beater.get().connected, "closed again while idle")


class PausedBeats:
    """``execute._beat_once`` for a Beater of a test: records each beat ("beat", pk) as its
    write; the first beat of a run in ``pause`` stops after the beater decided it, before
    its write, until the test lets it go."""

    def __init__(self, *pause: int) -> None:
        self.events: list[tuple[str, int]] = []
        self.decided = {pk: threading.Event() for pk in pause}
        self.go = {pk: threading.Event() for pk in pause}

    def __call__(self, pk: int, attempt: int) -> None:
        if pk in self.decided and not self.decided[pk].is_set():
            self.decided[pk].set()
            assert self.go[pk].wait(60), "never let go"
        self.events.append(("beat", pk))

    def beats(self, pk: int) -> int:
        return self.events.count(("beat", pk))


def wait_for(predicate, what: str) -> None:
    deadline = time.monotonic() + 60  # only against it never happening
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_remove_waits_for_a_beat_of_its_run_under_way(settings, monkeypatch):
    """A beat decided just before ``remove()`` must not write just after it: ``remove()``
    returns only once that beat is done (the beat held between decision and write by an
    event; remove()'s waiting seen as it happens, not after some time)."""
    settings.RUN_PROGRESS_SECONDS = 0.05
    beats = PausedBeats(1)
    monkeypatch.setattr(execute, "_beat_once", beats)
    beater = execute.Beater()  # this test's own, not the process's
    beater.add(1, 1)
    assert beats.decided[1].wait(60)  # run 1's beat decided; its write waits
    waiting = threading.Event()

    class Watched(threading.Condition):
        def wait(self, timeout=None):
            waiting.set()  # remove() waits for the beat under way
            return super().wait(timeout)

    beater.beat_ended = Watched(beater.lock)
    removed = threading.Event()

    def remove() -> None:
        beater.remove(1)
        beats.events.append(("removed", 1))
        removed.set()

    remover = threading.Thread(target=remove)
    remover.start()
    wait_for(lambda: waiting.is_set() or removed.is_set(), "remove() returned or waits")
    assert not removed.is_set(), "remove() returned while a beat of its run was under way"
    beats.go[1].set()
    remover.join(60)
    assert beats.events == [("beat", 1), ("removed", 1)]


def test_a_run_removed_after_its_beat_came_due_is_not_beaten(settings, monkeypatch):
    """Runs 1 and 2 come due together; while run 1's beat is held, run 2 is removed: the
    beater must not beat run 2 after that (it decided its beats before the removal)."""
    settings.RUN_PROGRESS_SECONDS = 0.05
    beats = PausedBeats(1, 3)
    monkeypatch.setattr(execute, "_beat_once", beats)
    beater = execute.Beater()
    beater.add(3, 1)
    assert beats.decided[3].wait(60)  # the thread is held in run 3's first beat
    beater.add(1, 1)
    beater.add(2, 1)
    added = time.monotonic()
    wait_for(lambda: time.monotonic() >= added + 0.05, "runs 1 and 2 due")
    beats.go[3].set()  # its next look finds runs 1 and 2 due together
    assert beats.decided[1].wait(60)
    beater.remove(2)
    beats.go[1].set()
    # Run 1 beats again at a later look: the look that found run 2 due is over.
    wait_for(lambda: beats.beats(1) >= 2, "a second beat of run 1")
    beater.remove(1)
    beater.remove(3)
    assert beats.beats(2) == 0, beats.events


@pytest.mark.django_db
def test_a_reused_clock_measurement_is_recorded_with_its_age(alice, bench, monkeypatch):
    """The executor measures the node's clock against the database at most every
    CLOCK_MAX_AGE_S per worker process; a run that reuses a measurement records its age
    (meta.clock.age_s), and a measurement older than the bound is taken again."""
    from django.db import connection

    from experiments.results import telemetry

    if connection.vendor != "postgresql":
        pytest.skip("SQLite shares this process's clock: nothing is measured")
    telemetry._clock_cache.clear()
    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1}, repetitions=3)
    first, second, third = matrix.runs.order_by("repetition")

    def clock(run: Run) -> dict:
        assert execute.execute(run.pk, queue(run), "w@test") == Run.Status.SUCCEEDED
        (doc,) = telemetry.for_run(run)
        return doc["meta"]["clock"]

    measured = clock(first)
    assert measured["age_s"] == 0.0 and measured["against"] == "database"
    time.sleep(0.05)
    reused = clock(second)
    assert 0.05 <= reused["age_s"] <= telemetry.CLOCK_MAX_AGE_S
    assert (reused["offset_s"], reused["rtt_s"]) == (measured["offset_s"], measured["rtt_s"])
    monkeypatch.setattr(telemetry, "CLOCK_MAX_AGE_S", 0.0)  # the measurement is now too old
    assert clock(third)["age_s"] == 0.0


def _spy_synchronous_commit(monkeypatch) -> dict[str, list[str]]:
    """Record PostgreSQL's synchronous_commit inside the claim's transaction (holding's
    try_acquire), the raw output's (telemetry.save_deferred) and the outcome's
    (parse_stored, or its one statement, store_row_at_once): the executor's own functions,
    wrapped; the database is real."""
    from django.db import connection

    from experiments.execution import holding
    from experiments.results import store, telemetry

    seen: dict[str, list[str]] = {"claim": [], "raw output": [], "outcome": []}

    def spy(step, function):
        def wrapped(*args, **kwargs):
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("SELECT current_setting('synchronous_commit')")
                    seen[step].append(cursor.fetchone()[0])
            else:
                seen[step].append("sqlite")
            return function(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(holding, "try_acquire", spy("claim", holding.try_acquire))
    monkeypatch.setattr(telemetry, "save_deferred", spy("raw output", telemetry.save_deferred))
    monkeypatch.setattr(execute, "parse_stored", spy("outcome", execute.parse_stored))
    monkeypatch.setattr(store, "store_row_at_once", spy("outcome", store.store_row_at_once))
    return seen


# The one statement of the raw output on PostgreSQL (``update_row_unflushed``) starts so.
UNFLUSHED = "WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true)"


@pytest.mark.django_db(transaction=True)
def test_only_the_raw_output_commit_skips_the_wal_flush(alice, bench, monkeypatch):
    """On PostgreSQL the raw output (with the run's telemetry) is one statement, its own
    transaction, that sets synchronous_commit off for that transaction only (set_config,
    local); the claim's transaction (it holds the nodes) and the outcome's (whose flush
    makes both durable) run with the server's synchronous default. On SQLite nothing of the
    kind is issued. The run's result is the same."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from experiments.models import RunTelemetry

    seen = _spy_synchronous_commit(monkeypatch)
    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1})
    run = matrix.runs.get()
    with CaptureQueriesContext(connection) as queries:
        assert execute.execute(run.pk, queue(run), "w@test") == Run.Status.SUCCEEDED
    statements = [q["sql"] for q in queries.captured_queries]
    sets = [sql for sql in statements if sql.startswith("SET")]
    assert sets == []
    if connection.vendor == "postgresql":
        assert seen == {"claim": ["on"], "raw output": [], "outcome": ["on"]}
        (raw,) = [sql for sql in statements if sql.startswith(UNFLUSHED)]
        assert 'INSERT INTO "experiments_runtelemetry"' in raw and '"raw_output"' in raw
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('synchronous_commit')")
            assert cursor.fetchone()[0] == "on", "set_config's local setting ends with it"
    else:
        assert seen == {"claim": ["sqlite"], "raw output": ["sqlite"], "outcome": ["sqlite"]}
        assert not [sql for sql in statements if "set_config" in sql]
    run.refresh_from_db()
    assert run.exit_code == 0 and run.raw_output and run.metrics.exists()
    assert RunTelemetry.objects.filter(run=run).exists() and run.bottleneck
    assert summaries.differences() == []


@pytest.mark.django_db(transaction=True)
def test_a_raw_output_the_one_statement_cannot_store_takes_the_transaction(
    alice, bench, monkeypatch
):
    """PostgreSQL: when the raw output's one statement writes nothing (here the run already
    has a metric row, whose summaries its UPDATE could not refresh), nothing of it is left
    and the raw output's transaction stores it instead, with SET LOCAL synchronous_commit
    off; the telemetry is stored once. SQLite takes the transaction anyway."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from experiments.models import Metric, RunTelemetry

    seen = _spy_synchronous_commit(monkeypatch)
    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1})
    run = matrix.runs.get()
    unflushed = execute.Attempt.update_unflushed

    def with_a_metric(attempt, *args, **kwargs):
        # An earlier store's metric row (written by a plain insert: no summary counts it).
        Metric.objects.bulk_create(
            [Metric(run_id=attempt.run.pk, name="write_bw", stat="mean", value=1.0, unit="B/s")]
        )
        return unflushed(attempt, *args, **kwargs)

    monkeypatch.setattr(execute.Attempt, "update_unflushed", with_a_metric)
    with CaptureQueriesContext(connection) as queries:
        assert execute.execute(run.pk, queue(run), "w@test") == Run.Status.SUCCEEDED
    statements = [q["sql"] for q in queries.captured_queries]
    if connection.vendor == "postgresql":
        assert len([sql for sql in statements if sql.startswith(UNFLUSHED)]) == 1
        # The outcome's one statement wrote nothing either (the metric row), then its
        # transaction stored it.
        assert seen == {"claim": ["on"], "raw output": ["off"], "outcome": ["on", "on"]}
        assert "SET LOCAL synchronous_commit = off" in statements
    else:
        assert seen["raw output"] == ["sqlite"]
    run.refresh_from_db()
    assert run.exit_code == 0 and run.raw_output and run.bottleneck
    assert RunTelemetry.objects.filter(run=run).count() == 1
    assert run.metrics.filter(name="write_bw", primary=True).exists()


@pytest.mark.django_db(transaction=True)
def test_the_raw_output_statement_writes_nothing_for_a_taken_attempt(alice, bench):
    """``Attempt.update_unflushed`` (PostgreSQL): the run's UPDATE and the telemetry's
    INSERT go together; a run taken from the attempt (or deleted) gets neither, and the
    fields it would have written stay staged for the general path."""
    from django.db import connection

    from experiments.execution.attempt import Attempt
    from experiments.models import RunTelemetry

    if connection.vendor != "postgresql":
        with pytest.raises(ValueError):
            Attempt(Run(pk=1, attempts=1), token="t", worker="w").update_unflushed(exit_code=0)
        return
    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1})
    run = matrix.runs.get()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, attempts=1)
    run.refresh_from_db()
    attempt = Attempt(run, token="t", worker="w")
    attempt.stage(pid=4242)
    row = RunTelemetry(
        run_id=run.pk, hostname="stor1", started_at=timezone.now(), interval_s=1.0, samples=0,
        data=b"x", cores=b"", meta={"a": [1]}, summary={},
    )  # fmt: skip
    Run.objects.filter(pk=run.pk).update(attempts=2)  # a later attempt claimed it
    assert attempt.update_unflushed(row, exit_code=3, raw_output="out") is False
    assert attempt.staged == {"pid": 4242}
    assert not RunTelemetry.objects.exists()
    assert Run.objects.get(pk=run.pk).raw_output == ""
    Run.objects.filter(pk=run.pk).update(attempts=1)
    assert attempt.update_unflushed(row, exit_code=3, raw_output="out") is True
    assert attempt.staged == {}
    stored = Run.objects.get(pk=run.pk)
    assert (stored.exit_code, stored.raw_output, stored.pid) == (3, "out", 4242)
    (kept,) = RunTelemetry.objects.filter(run=run)
    assert (kept.hostname, bytes(kept.data), kept.meta) == ("stor1", b"x", {"a": [1]})
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('synchronous_commit')")
        assert cursor.fetchone()[0] == "on"
    with connection.cursor() as cursor:  # what the statement relies on: local to its own
        cursor.execute(
            "WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true)) "
            "SELECT current_setting('synchronous_commit') FROM unflushed"
        )
        assert cursor.fetchone()[0] == "off"
        cursor.execute("SELECT current_setting('synchronous_commit')")
        assert cursor.fetchone()[0] == "on"


@pytest.mark.django_db
def test_a_run_inside_a_callers_transaction_leaves_its_durability_alone(alice, bench):
    """Executed inside a caller's transaction (an eager task; this test's own transaction),
    the raw output's block is a savepoint: SET LOCAL there would last to the caller's
    commit, so nothing is set."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1})
    run = matrix.runs.get()
    with CaptureQueriesContext(connection) as queries:
        assert execute.execute(run.pk, queue(run), "w@test") == Run.Status.SUCCEEDED
    assert not [q for q in queries.captured_queries if q["sql"].startswith("SET")]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('synchronous_commit')")
            assert cursor.fetchone()[0] == "on"


def _run_updates(queries) -> list[str]:
    return [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith('UPDATE "experiments_run"')
        or (q["sql"].startswith("WITH ") and 'UPDATE "experiments_run"' in q["sql"])
    ]


@pytest.mark.django_db
def test_a_short_runs_raw_output_and_verdict_are_one_update(alice, bench):
    """Issue 17: the run's row is written three times in all (claim, raw output with the
    telemetry's verdict, outcome with the parsed fields), and the verdict is the one its
    stored telemetry gives."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from experiments.results import telemetry as stored

    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1})
    run = matrix.runs.get()
    token = queue(run)
    with CaptureQueriesContext(connection) as queries:
        assert execute.execute(run.pk, token, "w@test") == Run.Status.SUCCEEDED
    updates = _run_updates(queries)
    assert len(updates) == 3, updates
    assert '"raw_output"' in updates[1] and '"bottleneck"' in updates[1]
    run.refresh_from_db()
    verdict = (run.bottleneck, run.bottleneck_evidence, run.steady, run.collapsed)
    assert verdict[0]
    stored.refresh_verdict(run)
    assert (run.bottleneck, run.bottleneck_evidence, run.steady, run.collapsed) == verdict
    assert summaries.differences() == []


def _stored_without_telemetry(alice, bench) -> Run:
    """A dd run executed while its telemetry cannot be stored: succeeded, with its raw
    output and metrics, and no telemetry row or verdict."""
    from experiments.models import RunTelemetry

    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1})
    run = matrix.runs.get()
    assert execute.execute(run.pk, queue(run), "w@test") == Run.Status.SUCCEEDED
    run.refresh_from_db()
    assert run.raw_output and run.exit_code == 0 and run.metrics.exists()
    assert not RunTelemetry.objects.filter(run=run).exists() and run.bottleneck == ""
    return run


@pytest.mark.django_db
def test_telemetry_that_cannot_be_stored_leaves_no_verdict_and_the_outcome_whole(
    alice, bench, monkeypatch
):
    """A failure while storing the telemetry (here its verdict) is undone alone: no row, no
    verdict; the raw output, metrics and status are stored as usual."""
    from experiments.results import telemetry as stored

    def broken(*args, **kwargs):
        raise RuntimeError("no verdict today")

    monkeypatch.setattr(stored, "refresh_verdict", broken)
    _stored_without_telemetry(alice, bench)
    assert summaries.differences() == []


def _transactions(queries) -> list[list[str]]:
    """The statements of each transaction (BEGIN to COMMIT or ROLLBACK) in ``queries``."""
    found, current = [], None
    for query in queries.captured_queries:
        sql = query["sql"]
        if sql.startswith("BEGIN"):
            current = []
        elif sql.startswith(("COMMIT", "ROLLBACK")) and current is not None:
            found.append([*current, sql])
            current = None
        elif current is not None:
            current.append(sql)
    return found


@pytest.mark.django_db(transaction=True)
def test_the_raw_output_and_outcome_transactions_take_no_extra_statements(alice, bench):
    """Issue 30: the raw output's transaction stores the telemetry without a savepoint;
    the outcome's checks that the attempt still runs in its conditional UPDATE (no SELECT
    ... FOR UPDATE before it) and releases the attempt's node leases with it (PostgreSQL:
    one statement, no transaction around it, with the metrics and the summaries; SQLite: a
    DELETE of its own). The result is the same."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from experiments.models import RunTelemetry

    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1})
    run = matrix.runs.get()
    with CaptureQueriesContext(connection) as queries:
        assert execute.execute(run.pk, queue(run), "w@test") == Run.Status.SUCCEEDED
    statements = [q["sql"] for q in queries.captured_queries]
    assert not [sql for sql in statements if "SAVEPOINT" in sql]
    assert not [sql for sql in statements if sql.startswith("SELECT 1 FROM")]
    if connection.vendor == "postgresql":
        # The raw output and the outcome are one statement each (no transaction around
        # them): no transaction after the claim's.
        (raw,) = [sql for sql in statements if sql.startswith(UNFLUSHED)]
        assert not [sql for sql in statements[statements.index(raw) :] if sql == "BEGIN"]
        assert "experiments_runtelemetry" in raw
        (outcome,) = [sql for sql in statements if sql.startswith("WITH updated AS (UPDATE")]
        for table in ("nodelease", "metric", "configsummary"):
            assert f'"experiments_{table}"' in outcome
    else:
        raw, outcome = _transactions(queries)[-2:]
        assert any("experiments_runtelemetry" in sql for sql in raw)
        deletes = [sql for sql in outcome if 'DELETE FROM "experiments_nodelease"' in sql]
        assert len(deletes) == 1 and deletes[0].startswith("DELETE")
    run.refresh_from_db()
    assert run.raw_output and run.exit_code == 0 and run.metrics.exists()
    assert RunTelemetry.objects.filter(run=run).exists() and run.bottleneck
    assert not NodeLease.objects.exists()
    assert summaries.differences() == []


@pytest.mark.django_db(transaction=True)
def test_telemetry_failing_in_the_database_leaves_the_raw_output_stored(
    alice, bench, monkeypatch, caplog
):
    """The raw output's transaction has no savepoint for the telemetry: a statement of it
    that fails in the database (which aborts a PostgreSQL transaction) undoes the whole
    transaction, which is stored again without the telemetry; the failure is logged and
    the run's outcome is as usual."""
    from django.db import connection

    from experiments.results import telemetry as stored

    def failing(run, *args, **kwargs):
        # A statement the database refuses (a NOT NULL column set to NULL).
        with connection.cursor() as cursor:
            cursor.execute('UPDATE "experiments_run" SET "status" = NULL WHERE id = %s', [run.pk])

    def refused(run, doc):
        # The one statement of PostgreSQL's raw output refused too (a hostname too long).
        row, verdict = unsaved(run, doc)
        row.hostname = "x" * 300
        return row, verdict

    unsaved = stored.unsaved
    monkeypatch.setattr(stored, "save", failing)
    monkeypatch.setattr(stored, "unsaved", refused)
    _stored_without_telemetry(alice, bench)
    assert "its telemetry could not be stored" in caplog.text
    assert not NodeLease.objects.exists()
    assert summaries.differences() == []


@pytest.mark.django_db(transaction=True)
def test_an_attempt_taken_as_it_ended_stores_no_outcome_and_frees_its_nodes(
    alice, bench, monkeypatch, caplog
):
    """The janitor took the run between the raw output's transaction and the outcome's (here:
    requeued it): the outcome's conditional UPDATE writes nothing, no metric is stored, the
    run stays queued for its next attempt, and this attempt's leases go (PostgreSQL: the
    outcome's one statement writes nothing, then its transaction finds why)."""

    def taken_first(parse):
        def taken(run, *args, **kwargs):
            Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED)
            return parse(run, *args, **kwargs)

        return taken

    monkeypatch.setattr(execute, "parse_stored", taken_first(execute.parse_stored))
    monkeypatch.setattr(execute, "parse_stored_at_once", taken_first(execute.parse_stored_at_once))
    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1})
    run = matrix.runs.get()
    execute.execute(run.pk, queue(run), "w@test")
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED and run.raw_output
    assert not run.metrics.exists()
    assert not NodeLease.objects.exists()
    assert "its outcome (succeeded) is not stored again" in caplog.text
    assert summaries.differences() == []


@pytest.mark.django_db(transaction=True)
def test_an_outcome_whose_summarised_columns_changed_takes_the_transaction(
    alice, bench, monkeypatch
):
    """Issue 30: the outcome's one statement (PostgreSQL) computes the configuration's
    summary rows from the run as the executor holds it; when a column they read changed in
    the database meanwhile (here the run was marked collapsed), it writes nothing, not even
    the release of the nodes, and the outcome's transaction stores the run as it is in the
    database: its summaries count it collapsed and agree with a recomputation."""
    from experiments.models import ConfigSummary

    declined = []
    at_once = execute.parse_stored_at_once

    def changed_first(run, *args, **kwargs):
        Run.objects.filter(pk=run.pk).update(collapsed=True)
        stored = at_once(run, *args, **kwargs)
        declined.append(not stored)
        assert NodeLease.objects.filter(run_id=run.pk).exists()
        return stored

    monkeypatch.setattr(execute, "parse_stored_at_once", changed_first)
    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1})
    run = matrix.runs.get()
    assert execute.execute(run.pk, queue(run), "w@test") == Run.Status.SUCCEEDED
    assert declined == [True]
    run.refresh_from_db()
    assert run.collapsed and run.metrics.filter(primary=True).exists()
    row = ConfigSummary.objects.get(config_key=run.config_key, name="write_bw")
    assert (row.n, row.collapsed_n) == (1, 1)
    assert not NodeLease.objects.exists()
    assert summaries.differences() == []


@pytest.mark.django_db
def test_a_run_deleted_before_its_raw_output_is_stored_leaves_no_telemetry(
    alice, bench, monkeypatch
):
    from experiments.models import NodeLease, RunTelemetry

    finish = execute._finish

    def deleted_first(attempt, *args, **kwargs):
        Run.objects.filter(pk=attempt.run.pk).delete()
        return finish(attempt, *args, **kwargs)

    monkeypatch.setattr(execute, "_finish", deleted_first)
    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1})
    run = matrix.runs.get()
    execute.execute(run.pk, queue(run), "w@test")
    assert not Run.objects.filter(pk=run.pk).exists()
    assert not RunTelemetry.objects.exists() and not NodeLease.objects.exists()


@pytest.mark.django_db
def test_a_starting_worker_removes_what_ended_attempts_left_and_keeps_the_rest(alice, bench):
    """Directories an attempt left (its worker died before removing them): those of a run
    that ended since or is gone are removed as a worker starts, with the attempt's own
    directory in the benchmark directory; those of a run waiting for its next attempt
    (which keeps their files in the run's history) or still running stay."""
    ended, waiting, running = make_matrix(
        alice, bench, tool="dd", params={"bs": "64k", "count": 4}, repetitions=3
    ).runs.order_by("pk")
    Run.objects.filter(pk=ended.pk).update(status=Run.Status.FAILED, attempts=2)
    Run.objects.filter(pk=waiting.pk).update(status=Run.Status.QUEUED, attempts=1)
    Run.objects.filter(pk=running.pk).update(status=Run.Status.RUNNING, attempts=1)
    scratch = Path(execute.settings.RUN_DIR)
    made = {}
    for run, attempt in ((ended, 2), (waiting, 1), (running, 1), (uuid.uuid4(), 1)):
        name = f"beeweb-run-{getattr(run, 'uuid', run)}-{attempt}"
        for root in (scratch, Path(bench.benchmark_dir)):
            (root / name).mkdir(parents=True)
            (root / name / "output.log").write_text("what the tool said\n")
        made[getattr(run, "pk", None)] = name
    (scratch / "not-a-run").mkdir()

    removed = execute.sweep_leftovers()
    left = {p.name for p in scratch.iterdir()}
    assert left == {made[waiting.pk], made[running.pk], "not-a-run"}
    assert {p.name for p in Path(bench.benchmark_dir).iterdir()} == {
        made[waiting.pk],
        made[running.pk],
        made[None],  # a run that is gone: its benchmark directory is not known
    }
    assert str(scratch / made[ended.pk]) in removed
    assert str(Path(bench.benchmark_dir) / made[ended.pk]) in removed


@pytest.mark.django_db
def test_the_decision_after_a_run_reads_nothing_outside_an_adaptive_matrix(alice, bench):
    """Issue 30: the outcome's UPDATE says whether the run's matrix is adaptive; outside one,
    the adaptive decision after the run (``after_run``) reads nothing (once: a later call
    reads the run as before). In an adaptive matrix it reads and decides as before."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from experiments.matrices import adaptive
    from experiments.models import CellState

    plain = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1})
    run = plain.runs.get()
    assert execute.execute(run.pk, queue(run), "w@test") == Run.Status.SUCCEEDED
    with CaptureQueriesContext(connection) as queries:
        assert adaptive.after_run(run.pk) is None
    assert queries.captured_queries == []
    with CaptureQueriesContext(connection) as queries:
        assert adaptive.after_run(run.pk) is None
    assert len(queries.captured_queries) == 1

    tuned = make_matrix(
        alice,
        bench,
        tool="dd",
        params={"bs": "4k", "count": 1},
        repetitions=2,
        max_repetitions=3,
        target_cv=50,
    )
    first, second = tuned.runs.order_by("repetition")
    for each in (first, second):
        assert execute.execute(each.pk, queue(each), "w@test") == Run.Status.SUCCEEDED
        adaptive.after_run(each.pk)
    assert CellState.objects.filter(matrix=tuned).exists()


@pytest.mark.django_db
def test_the_claim_reads_the_servers_roles_with_the_node_locks(alice, bench):
    """Issue 30: the claim's node lock reads the BeeGFS roles of the held servers (and
    whether beeweb changed a config of one that is not restored yet), which the tool's
    preparation then uses without a statement of its own; the same as its own query reads.
    Taken once: a second look reads them."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from experiments.execution import beegfs, holding
    from experiments.models import BeegfsConfigChange, TestbedNode

    member = TestbedNode.objects.filter(testbed=bench).select_related("node").first()
    TestbedNode.objects.filter(pk=member.pk).update(storage=True, metadata=True)
    BeegfsConfigChange.objects.create(
        hostname=member.node.hostname, service="storage", conf="/x", applied_at=timezone.now()
    )
    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "4k", "count": 1})
    run = matrix.runs.get()
    attempt = execute.claim(run.pk, queue(run), "w@test")
    assert attempt is not None and attempt.held
    with CaptureQueriesContext(connection) as queries:
        kept = beegfs.roles(attempt.run)
    assert queries.captured_queries == []
    assert kept == {member.node.hostname: (["storage", "meta"], True)}
    with CaptureQueriesContext(connection) as queries:
        assert beegfs.roles(attempt.run) == kept
    assert len(queries.captured_queries) == 1
    assert holding.server_roles(attempt.run, list(attempt.run.nodes_held)) is None
