"""Running one benchmark run on this node: claim it, prepare the node, start the tool in its
own process group, stream its output into the database, stop it on timeout or cancel, then
store the raw output *before* parsing it. The claim starts an ``Attempt``
(``experiments.execution.attempt``) that every step takes; a Slurm-mode run's allocation is
``experiments.execution.allocation``.

Invariants:
- A delivery whose dispatch token is not the run's current token does nothing (duplicate
  delivery, or a message the janitor already replaced).
- The tool never outlives its worker: the worker's reaper process (``runners.reaper``)
  starts it and kills its whole process group when the worker process dies, so a worker
  killed mid-run leaves no orphan writing to the disks.
- Raw output reaches the database every ``RUN_PROGRESS_SECONDS`` while the tool runs and in
  full when it ends, whatever the exit status.
- Confinement comes from the node, not the server (``experiments.execution.nodepolicy``): a run
whose
  benchmark directory resolves outside the worker's BEEWEB_NODE_DIRS fails before anything is
  created or started; otherwise it works in a fresh directory of its own, and the executor
  removes that directory and its scratch directory, never a path a parameter names. OS
  settings are applied only when BEEWEB_NODE_TUNING allows them and are restored afterwards.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import (
    DatabaseError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    connection,
    transaction,
)
from django.db.models.expressions import Col

from experiments.execution import agent, allocation, beegfs, holding, nodepolicy
from experiments.execution.attempt import Attempt, Outcome
from experiments.models import NodeLease, Run, Worker
from experiments.models.runs import update_row
from experiments.results import telemetry
from experiments.results.store import (
    MAX_OUTPUT_BYTES,
    NOT_RUNNING,
    parse_stored,
    parse_stored_at_once,
    record_launch,
)
from experiments.shared import clock, prepared
from runners import nodeconfig, reaper, slurm
from runners.launch import LaunchError, LaunchSpec, tool_params
from runners.tools import get_adapter
from runners.tools.base import Command, ParamError

log = logging.getLogger(__name__)

KILL_GRACE_SECONDS = 5.0
# Output of earlier attempts kept on the run when it is requeued (per attempt).
HISTORY_BYTES = 64 * 1024


def claim(run_id: int, token: str, worker: str) -> Attempt | None:
    """Mark the run as running by this worker and start its attempt, or None when this
    delivery is stale. In the same transaction (one durable commit on the fast path), the
    run's first try at holding its nodes (``experiments.execution.holding``): the attempt's
    ``held`` says whether it holds them already. A claim whose commit was answered is
    remembered by this process (``_lost_claim``)."""
    attempt = _claim(run_id, token, worker)
    if attempt is not None:
        _confirm(run_id, token)
    return attempt


def _claim(run_id: int, token: str, worker: str) -> Attempt | None:
    with transaction.atomic():
        run = _locked_run(run_id)
        if run is None:
            log.warning("run %s no longer exists; delivery ignored", run_id)
            return None
        if _lost_claim(run, token, worker):
            # This process claimed the run and the database went away before the commit's
            # answer came (the claim raised; Celery tried the task again): the commit went
            # through, nothing of the attempt started, so the attempt goes on from here.
            log.warning(
                "run %s: the claim of attempt %s was committed but its answer lost (the "
                "database went away); the attempt goes on",
                run_id,
                run.attempts,
            )
            return Attempt(run, token=str(token), worker=worker, held=_holds_all(run))
        if run.status != Run.Status.QUEUED or str(run.dispatch_token) != str(token):
            log.info("run %s: stale delivery (status %s); ignored", run_id, run.status)
            return None
        now = clock.now()
        if run.cancel_requested:
            run.status = Run.Status.CANCELLED
            run.finished_at = now
            run.error = "cancelled before it started"
            run.save(update_fields=["status", "finished_at", "error", "updated"])
            return None
        launch = dict(run.launch)
        if run.raw_output or run.error:
            history = list(launch.get("history", []))
            history.append(
                {
                    "attempt": run.attempts,
                    "worker": run.worker,
                    "error": run.error,
                    "exit_code": run.exit_code,
                    "output_tail": run.raw_output[-HISTORY_BYTES:],
                }
            )
            launch["history"] = history
        run.launch = launch
        run.status = Run.Status.RUNNING
        run.attempts += 1
        run.worker = worker
        run.pid = os.getpid()
        run.started_at = now
        run.finished_at = None
        run.heartbeat_at = now
        run.raw_output = ""
        run.error = ""
        run.parse_error = ""
        run.exit_code = None
        run.waiting_for = ""
        names = holding.nodes_for(run)
        # Marks the run as waiting (waiting_for, nodes_held) when it cannot hold them yet.
        held, _ = holding.try_acquire(run, names)
        if held:
            run.nodes_held = names
        # What run.save(update_fields=CLAIMED_FIELDS) writes (no summarised field among
        # them), as one plain UPDATE.
        run.updated = now
        update_row(run.pk, {name: getattr(run, name) for name in CLAIMED_FIELDS})
        return Attempt(run, token=str(token), worker=worker, held=held)


# The claims this process knows it made (run, token): those whose commit it saw answered.
# A run shown as running with this process's pid and a claim not among them was claimed by a
# commit whose answer was lost (``_lost_claim``). The oldest are forgotten past
# CONFIRMED_MAX (a retry comes within a minute of its failure, a few claims later).
_confirmed: dict[tuple[int, str], None] = {}
CONFIRMED_MAX = 10000


def _confirm(run_id: int, token: str) -> None:
    _confirmed[(run_id, str(token))] = None
    while len(_confirmed) > CONFIRMED_MAX:
        del _confirmed[next(iter(_confirmed))]


def _lost_claim(run: Run, token: str, worker: str) -> bool:
    """Whether ``run`` (locked) is running an attempt that this process claimed with
    ``token`` without seeing the claim's commit answered, and that has started nothing since:
    the run's pid is still this process's (its tool's replaces it once it starts) and no
    claim of this process with that token was confirmed (one that was, whose attempt failed
    later, is left to the janitor: its tool may have started; ``execute`` withdraws the
    confirmation of an attempt that failed for want of the database before anything of it
    started)."""
    return (
        run.status == Run.Status.RUNNING
        and str(run.dispatch_token) == str(token)
        and run.worker == worker
        and run.pid == os.getpid()
        and (run.pk, str(token)) not in _confirmed
    )


def _holds_all(run: Run) -> bool:
    """Whether this attempt of ``run`` holds a lease on every node it uses."""
    names = holding.nodes_for(run)
    held = set(
        NodeLease.objects.filter(run_id=run.pk, attempt=run.attempts).values_list(
            "hostname", flat=True
        )
    )
    return set(names) <= held


def _locked_run(run_id: int) -> Run | None:
    """``Run.objects.select_for_update().filter(pk=run_id).first()`` as one plain SELECT of
    the row's columns, converted by the converters the ORM would apply, worked out once per
    process (``_read_plan``): the ORM compiled this query of ~60 columns for every run, and
    a raw queryset works out its column mapping and converters for every run too."""
    sql, names, converters = _read_plan(connection.vendor)
    with prepared.cursor() as cursor:
        cursor.execute(sql, [run_id])
        row = cursor.fetchone()
    if row is None:
        return None
    values = list(row)
    for index, expression, functions in converters:
        value = values[index]
        for function in functions:
            value = function(value, expression, connection)
        values[index] = value
    return Run.from_db(connection.alias, names, values)


_READ_PLANS: dict[str, tuple[str, list[str], list[tuple[int, Any, list]]]] = {}


def _read_plan(vendor: str) -> tuple[str, list[str], list[tuple[int, Any, list]]]:
    plan = _READ_PLANS.get(vendor)
    if plan is None:
        quote = connection.ops.quote_name
        table = Run._meta.db_table
        fields = Run._meta.concrete_fields
        lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
        sql = (
            f"SELECT {', '.join(quote(f.column) for f in fields)} FROM {quote(table)} "
            f"WHERE {quote(Run._meta.pk.column)} = %s{lock}"
        )
        converters = []
        for index, field in enumerate(fields):
            column = Col(table, field)
            functions = connection.ops.get_db_converters(column) + column.get_db_converters(
                connection
            )
            if functions:
                converters.append((index, column, functions))
        plan = _READ_PLANS[vendor] = (sql, [f.attname for f in fields], converters)
    return plan


# What claim() changes (the rest of the row stays as it is).
CLAIMED_FIELDS = [
    "launch",
    "status",
    "attempts",
    "worker",
    "pid",
    "started_at",
    "finished_at",
    "heartbeat_at",
    "raw_output",
    "error",
    "parse_error",
    "exit_code",
    "waiting_for",
    "nodes_held",
    "updated",
]


def _finish(
    attempt: Attempt,
    status: str,
    output: str,
    exit_code: int | None,
    error: str,
    remove: list[Path] | None = None,
) -> None:
    """Store the outcome in two transactions: the raw output (the run still shows as
    running) with the telemetry of the tool's run, committed before anything is parsed;
    then the parsed metrics, the final status and the release of the run's nodes, all or
    nothing. Nothing when the run was deleted meanwhile. ``remove``: the attempt's
    directories, removed once the raw output is stored (so a worker killed before that
    leaves the tool's log on the node, for the next attempt to keep in the run's history:
    ``_salvage``) and before the outcome is.

    Each transaction is tried again, on a fresh connection, while the database is
    unreachable (a PostgreSQL restart or failover; ``_retrying``, up to DB_RETRY_SECONDS):
    an outcome is never dropped for a connection lost mid-store, and never stored twice (a
    store whose commit went through unanswered finds, when tried again, the run no longer
    running this attempt, and writes nothing).

    Durability: on PostgreSQL the first of the two commits without waiting for its WAL
    flush (``_commit_unflushed``; usually one statement that is its own transaction,
    ``store_raw_at_once``); the second, synchronous, commit flushes the WAL up to its own
    record, so once the outcome is committed both are durable. The claim stays
    synchronous: it holds the run's nodes before the tool touches them."""
    run = attempt.run
    doc = attempt.take_telemetry()
    tries = itertools.count()

    def store_raw() -> bool:
        if connection.in_atomic_block:
            return store_raw_with(doc)
        if store_raw_at_once():
            return True
        if doc is None:
            return store_raw_with(doc)
        try:
            return store_raw_with(doc, savepoint=False)
        except _TelemetryFailed:
            # Its failure undid the whole transaction (no savepoint): the raw output again,
            # without the telemetry.
            return store_raw_with(None)

    def store_raw_at_once() -> bool:
        """The raw output's transaction as one statement (PostgreSQL, outside any
        transaction; ``Attempt.update_unflushed``): the run's UPDATE with its verdict, the
        telemetry's INSERT, committed without waiting for the WAL flush as
        ``_commit_unflushed`` lets the general path's. Only for the first store of a first
        attempt whose telemetry is its own node's alone (no earlier row to replace, no other
        node's to read back for the verdict). False when it wrote nothing, for whatever
        reason (the run taken from the attempt or deleted, a metric row to refresh the
        summaries of, the telemetry refused by the database or failing to pack): the
        general path, tried next, stores it or finds and logs why not."""
        if connection.vendor != "postgresql" or (doc is not None and run.attempts != 1):
            return False
        if doc is not None and agent.others_held(run):
            return False
        if next(tries) != 0:
            return False
        row, verdict = None, {}
        if doc is not None:
            try:
                row, verdict = telemetry.unsaved(run, telemetry.with_clock(doc))
            except TRANSIENT:
                raise
            except Exception:
                return False  # the general path stores it again, and logs why it fails
        try:
            return attempt.update_unflushed(
                row,
                raw_output=output[-MAX_OUTPUT_BYTES:],
                exit_code=exit_code,
                finished_at=clock.now(),
                heartbeat_at=clock.now(),
                **verdict,
            )
        except TRANSIENT:
            raise  # tried again by ``_retrying``: the general path, as a later store
        except DatabaseError:
            return False  # undone whole (one statement); the general path says why

    def store_raw_with(doc: dict[str, Any] | None, savepoint: bool = True) -> bool:
        outermost = not connection.in_atomic_block
        with transaction.atomic():
            if outermost:
                _commit_unflushed()
            # The tool's telemetry first; its verdict is written with the raw output, in one
            # UPDATE. A failure to store it is logged and never the run's outcome: in a
            # savepoint, it is undone alone; without one (``savepoint`` False, the outermost
            # transaction: two statements fewer per run), the transaction is undone and the
            # raw output stored again without it (``_TelemetryFailed``). Alone: a run
            # holding its own node only has no other node's document. A first attempt has no
            # earlier row of this node to replace (unless this is a store tried again).
            verdict: dict[str, Any] = {}
            how = {
                "alone": not agent.others_held(run),
                "first": run.attempts == 1 and next(tries) == 0,
                "verdict": verdict,
            }
            if savepoint:
                telemetry.save_deferred(run, doc, **how)
            elif doc is not None:
                try:
                    telemetry.save_deferred(run, doc, savepoint=False, **how)
                except TRANSIENT:
                    raise  # the database went away: the whole store is tried again
                except Exception as exc:
                    log.exception("run %s: its telemetry could not be stored", run.pk)
                    raise _TelemetryFailed from exc
            if not attempt.update(
                raw_output=output[-MAX_OUTPUT_BYTES:],
                exit_code=exit_code,
                finished_at=clock.now(),
                heartbeat_at=clock.now(),
                **verdict,
            ):
                log.warning(
                    "run %s was deleted, or taken from attempt %s (its heartbeats stopped), "
                    "while it ran; its outcome (%s) is dropped",
                    run.pk,
                    run.attempts,
                    status,
                )
                transaction.set_rollback(True)  # and its telemetry with it
                return False
        return True

    if not _retrying(run, "storing its raw output", store_raw):
        if remove and _retrying(run, "checking whether it was requeued", lambda: _requeued(run)):
            # Its next attempt runs on this node (the run's launcher) and keeps what this one
            # measured in the run's history (``_salvage``), then removes the directories.
            log.warning(
                "run %s: attempt %s was taken and the run requeued; its files stay in %s for "
                "the next attempt to keep",
                run.pk,
                run.attempts,
                ", ".join(map(str, remove)),
            )
        elif remove:
            _remove_beating(attempt, remove)
        return
    if remove:
        _remove_beating(attempt, remove)

    def outcome(parsed: Run) -> dict[str, Any]:
        """The status and error, written with the parsed fields (one UPDATE)."""
        if status == Run.Status.SUCCEEDED and parsed.parse_error:
            return {
                "status": Run.Status.FAILED,
                "error": f"the output could not be parsed: {parsed.parse_error}",
            }
        return {"status": status, "error": error}

    def store_outcome() -> bool:
        # Usually one statement (PostgreSQL, a first store: ``parse_stored_at_once``); the
        # transaction below otherwise, which also finds out why it was not.
        if output.strip() and parse_stored_at_once(run, outcome, run.attempts):
            return True
        try:
            with transaction.atomic():
                if not output.strip():
                    attempt.update(**outcome(run))
                    holding.release(run)
                # The janitor may have taken the run between the two transactions: the
                # outcome's UPDATE is conditional on the attempt (and locks the row), and
                # the attempt's leases go with it (``store_row``), in one statement on
                # PostgreSQL.
                elif (
                    parse_stored(run, outcome=outcome, attempt=run.attempts, release=True)
                    is NOT_RUNNING
                ):
                    log.warning(
                        "run %s was taken from attempt %s as it ended (or its outcome was "
                        "stored by a commit whose answer was lost); its outcome (%s) is not "
                        "stored again",
                        run.pk,
                        run.attempts,
                        status,
                    )
        except IntegrityError:
            # Foreign keys are checked as the transaction commits: a run deleted meanwhile.
            if Run.objects.filter(pk=run.pk).exists():
                raise
            log.warning("run %s was deleted while its output was parsed", run.pk)
            return False
        return True

    tried = False

    def store_outcome_again() -> bool:
        """The outcome's transaction; tried again, the raw output's first: its commit did
        not wait for the WAL flush (``_commit_unflushed``), so a server that went away
        before the outcome's commit may have lost it."""
        nonlocal tried
        if tried and not store_raw():
            return False
        tried = True
        return store_outcome()

    if _retrying(run, "storing its outcome", store_outcome_again):
        attempt.released = True


class _TelemetryFailed(Exception):
    """The telemetry of a run could not be stored in the raw output's transaction, which
    had no savepoint for it (``_finish``): that transaction is rolled back and tried again
    without it."""


def _requeued(run: Run) -> bool:
    """Whether the run waits for its next attempt (the janitor requeued it)."""
    return Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED).exists()


# What a database that went away raises (a PostgreSQL restart or failover: the connection
# refused, reset, or terminated by the server's shutdown), as Django wraps it.
TRANSIENT = (OperationalError, InterfaceError)


def _reconnect() -> None:
    """Drop this thread's database connection: Django opens a new one at the next query (it
    never reconnects a broken one by itself)."""
    with contextlib.suppress(Exception):
        connection.close()


def _retrying(run: Run, what: str, step: Callable[[], Any]) -> Any:
    """``step()`` (a whole transaction, or one statement outside any); tried again on a fresh
    connection while the database is unreachable, with a growing pause, for up to
    DB_RETRY_SECONDS; then its error. Inside a caller's transaction it is tried once: only
    the outermost transaction can be tried again."""
    if connection.in_atomic_block:
        return step()
    outage = Outage(run, what)
    while True:
        try:
            result = step()
        except TRANSIENT as exc:
            outage.failed(exc)
            continue
        outage.ended()
        return result


class Outage:
    """A stretch of failed database writes of a run's attempt: ``failed`` (from an ``except``
    of TRANSIENT) drops the connection, logs the first failure and sleeps before the next
    try (``pause``: growing from 0.25 to 5 s; no sleep for a loop that paces itself), and
    re-raises once the stretch lasted DB_RETRY_SECONDS; ``ended`` logs how long it lasted."""

    def __init__(self, run: Run, what: str, pause: bool = True):
        self.run = run
        self.what = what
        self.pause = 0.25 if pause else 0.0
        self.since: float | None = None
        self.failures = 0

    def failed(self, exc: Exception) -> None:
        _reconnect()
        now = time.monotonic()
        if self.since is None:
            self.since = now
            log.warning(
                "run %s: %s: the database is unreachable (%s); trying again for up to %g s",
                self.run.pk,
                self.what,
                (str(exc).strip().splitlines() or [type(exc).__name__])[0],
                settings.DB_RETRY_SECONDS,
            )
        elif now - self.since > settings.DB_RETRY_SECONDS:
            raise exc
        self.failures += 1
        if self.pause:
            time.sleep(self.pause)
            self.pause = min(self.pause * 2, 5.0)

    def ended(self) -> None:
        if self.since is not None:
            log.warning(
                "run %s: %s: the database answered again after %.1f s (%d failed tries)",
                self.run.pk,
                self.what,
                time.monotonic() - self.since,
                self.failures,
            )
            self.since = None
            self.failures = 0
            self.pause = 0.25 if self.pause else 0.0


def _commit_unflushed() -> None:
    """Let the current (outermost) transaction commit without waiting for the WAL flush
    (PostgreSQL's ``synchronous_commit = off`` for this transaction only): it is visible to
    every session at once and survives any crash of the worker; only a crash of the
    PostgreSQL server within ~3 x wal_writer_delay (600 ms by default) can lose it. Used
    for the raw output's commit, which the outcome's synchronous commit follows at once
    on the same session. Why losing it there is safe:

    - No durable commit by any session can depend on it and survive without it: a commit
      that saw it comes later in the WAL, and flushing that commit flushes this one.
    - The worker's next statement is the outcome's transaction, on the same session: a
      server crash has killed that session, so the outcome cannot be committed on it
      (Django never reconnects inside a transaction). ``_finish`` tries the outcome again on
      a fresh connection only after storing the raw output again (it still has it), so the
      outcome is never committed without the raw output; when the database stays away
      longer than DB_RETRY_SECONDS the task fails, the run is left *running* with its last
      durable heartbeat, and the janitor requeues it once that heartbeat is stale, as after
      a worker killed just before it stored the raw output.
    - The claim is not committed this way: a lost claim would leave the run *queued* and
      its node leases gone while its tool runs, and another run could hold those nodes.

    The raw output's one statement (``Attempt.update_unflushed``) sets the same for its
    own transaction, with set_config in its WITH. Nothing on SQLite (a commit there is what
    it is)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")


def _kill_group(spawner: reaper.Reaper | None, pid: int) -> int | None:
    """Stop the tool's process group: SIGTERM, SIGKILL to whatever is left once the tool
    has exited or KILL_GRACE_SECONDS passed; the tool's exit code (None when unknown)."""
    code = None
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    code = _reaped(spawner, pid, KILL_GRACE_SECONDS)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)  # what is left of the group (a fio job process, say)
    return code if code is not None else _reaped(spawner, pid, KILL_GRACE_SECONDS)


def _reaped(spawner: reaper.Reaper | None, pid: int, timeout: float) -> int | None:
    if spawner is None:
        time.sleep(min(timeout, 0.5))
        return None
    try:
        return spawner.wait(pid, timeout)
    except reaper.ReaperGone:
        return None


class Refused(Exception):
    """This node does not let the run work where it asks to; nothing was created or started."""


def _run_dir(run: Run, worker: str) -> Path:
    """Create the fresh directory this attempt of the run works in, inside its benchmark
    directory, once both are checked against this node's BEEWEB_NODE_DIRS (symlinks resolved).
    Refused when the node does not allow it or the directory cannot be made fresh."""
    try:
        policy = nodepolicy.current()
    except ImproperlyConfigured as exc:
        raise Refused(f"refused: this worker's configuration is invalid: {exc}") from None
    try:
        workdir = LaunchSpec.read(run.launch).workdir
    except LaunchError as exc:
        raise Refused(f"refused: {exc}; nothing was started") from None
    real = os.path.realpath(workdir) if os.path.isabs(workdir) else ""
    if not real or not policy.allows_dir(real):
        shown = workdir if real in ("", workdir) else f"{workdir} (resolves to {real})"
        raise Refused(
            f"refused: the benchmark directory {shown or '(none)'} is outside this node's "
            f"{nodepolicy.DIRS_VAR} ({policy.describe_dirs()}); nothing was started"
        )
    if not os.path.isdir(real):
        raise Refused(f"benchmark directory {workdir} does not exist on {worker}")
    path = os.path.join(real, nodepolicy.run_dir_name(run.uuid, run.attempts))
    try:
        # mkdir, not makedirs: it fails when the name exists, so the run never starts in (and
        # never removes) a directory it did not create.
        os.mkdir(path, 0o755)
    except OSError as exc:
        error = f"could not create the run's own directory {path}: {exc.strerror or exc}"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise Refused(
                f"the benchmark directory's file system is full: {error}{_free(Path(real))}; "
                "nothing was started"
            ) from None
        raise Refused(f"refused: {error}") from None
    # A directory swapped for a symlink between the check and mkdir shows here.
    resolved = os.path.realpath(path)
    if not policy.allows_dir(resolved) or os.path.dirname(resolved) != real:
        with contextlib.suppress(OSError):
            os.rmdir(path)  # the empty directory just made; rmdir removes nothing else
        raise Refused(
            f"refused: the run's own directory {path} resolves to {resolved}, outside this "
            f"node's {nodepolicy.DIRS_VAR} ({policy.describe_dirs()}); nothing was started"
        )
    return Path(resolved)


def _remove(path: Path) -> None:
    """Remove a directory the executor created. rmtree does not follow symlinks inside it
    (and refuses one in its place), so only what is inside is removed."""
    try:
        if path.is_symlink():
            log.warning("%s was replaced by a symlink; not removed", path)
        elif path.is_dir():
            shutil.rmtree(path)
    except OSError as exc:
        log.warning("could not remove %s: %s", path, exc)


def _check_paths(command: Command, ctx: Any) -> None:
    """ParamError unless the command writes its files in scratch and wants directories made
    in the run's own directory only (the adapters promise it; this keeps them to it)."""
    for name, paths, root in (
        ("files", [Path(p) for p in command.files], ctx.scratch),
        ("dirs", command.dirs, ctx.workdir),
    ):
        for path in paths:
            full = os.path.normpath(path)
            if os.path.commonpath([full, str(root)]) != str(root):
                raise ParamError(name, f"{path} is outside {root}")


def _lay_out(command: Command, ctx: Any) -> None:
    """Write the command's files (scratch) and make its directories (run directory)."""
    for path, content in command.files.items():
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    for directory in command.dirs:
        if Path(os.path.normpath(directory)) != ctx.workdir:
            os.makedirs(directory, exist_ok=True)


def execute(run_id: int, token: str, worker: str) -> str:
    """Run one benchmark run to its end; returns the final status (or "stale").
    (Celery's Django fix-up closes stale database connections around each task.)

    Before anything touches a node, the run holds every node it uses
    (``experiments.execution.holding``),
    waiting while another run holds one of them; they are freed when the attempt ends.
    The run works in a fresh directory of its own inside its benchmark directory (refused,
    before anything is created or started, when this node's BEEWEB_NODE_DIRS does not
    contain it) and a scratch directory under RUN_DIR; both are removed afterwards, and
    nothing else is."""
    attempt = claim(run_id, token, worker)
    if attempt is None:
        return "stale"
    run = attempt.run
    try:
        _salvage(attempt)
        stopped = None if attempt.held else _hold(attempt)
        if stopped is not None:
            _finish(attempt, *stopped)
            return run.status
        with _beating(run):
            _attempt(attempt)
        return run.status
    except TRANSIENT:
        if not attempt.started:
            # The database went away before anything of the attempt started (its node checks,
            # its tuning, its servers' preparation): Celery's retry of the task takes the
            # attempt up again (``_lost_claim``) rather than leaving it to the janitor.
            _confirmed.pop((run_id, str(token)), None)
        raise
    finally:
        if not attempt.released:
            try:
                _retrying(run, "freeing its nodes", lambda: holding.release(run))
            except TRANSIENT as exc:
                # Its leases count as free once its heartbeats are RUN_STALE_SECONDS old.
                log.warning("run %s: its nodes could not be freed: %s", run.pk, exc)


# What ``_salvage`` keeps of an earlier attempt's files (the tool's log first, then the
# result files such as fio's JSON), at most this much of each, HISTORY_BYTES in all.
SALVAGE_FILE_BYTES = 32 * 1024


def _salvage(attempt: Attempt) -> None:
    """What the previous attempt of the run left on this node: its worker died (SIGKILL,
    the machine's OOM killer, a power cut) after the tool started and before the outcome
    was stored, so its directories were never removed. The tool's log and result files
    in its scratch directory are what it measured: they are kept in the run's history
    (``launch.history[-1].left_on_node``, shown with the earlier attempt on the run page) and
    both directories removed (the benchmark directory's files would fill the disk).

    They are not stored as the run's result: the janitor requeued the run because its
    worker stopped, and a measurement whose worker died cannot be told apart from one the
    death disturbed (the run's own directory half removed, its telemetry lost, the node's
    tuning never restored); the next attempt measures again, and the earlier one's output
    stays for whoever wants to compare. Nothing when the previous attempt ran elsewhere or
    left nothing."""
    run = attempt.run
    previous = run.attempts - 1
    if previous < 1:
        return
    name = nodepolicy.run_dir_name(run.uuid, previous)
    scratch = Path(settings.RUN_DIR) / name
    leftovers = [path for path in (scratch, _left_workdir(run, name)) if path is not None]
    if not any(path.is_dir() and not path.is_symlink() for path in leftovers):
        return
    kept: dict[str, str] = {}
    if scratch.is_dir() and not scratch.is_symlink():
        files = sorted(
            (p for p in scratch.iterdir() if p.is_file() and not p.is_symlink()),
            key=lambda p: (p.name != "output.log", p.name),
        )
        room = HISTORY_BYTES
        for path in files:
            if room <= 0:
                break
            try:
                text = _read(path, min(SALVAGE_FILE_BYTES, room))
            except OSError:
                continue
            if text.strip():
                kept[path.name] = text
                room -= len(text.encode())
    launch = dict(run.launch)
    history = [dict(entry) for entry in launch.get("history", [])]
    if kept and history and history[-1].get("attempt") == previous:
        history[-1]["left_on_node"] = kept
        launch["history"] = history
        if _retrying(
            run, "keeping what its previous attempt left", lambda: attempt.update(launch=launch)
        ):
            log.warning(
                "run %s: attempt %s ended without storing its outcome; its files (%s) are kept "
                "in the run's history",
                run.pk,
                previous,
                ", ".join(kept),
            )
    _remove_beating(attempt, [p for p in leftovers if p.is_dir() and not p.is_symlink()])


def sweep_leftovers() -> list[str]:
    """Remove what attempts left on this node that no attempt will take up (``_salvage``):
    their worker died before removing their directories, and their run has ended since
    (failed for good, cancelled) or is gone. An attempt still running, or whose run waits
    for its next attempt, keeps its directories. The paths removed. Run by each worker as it
    starts (after its janitor sweep, which requeues what its previous process ran)."""
    root = Path(settings.RUN_DIR)
    pattern = re.compile(re.escape(nodepolicy.RUN_DIR_PREFIX) + r"([0-9a-f-]{36})-(\d+)")
    try:
        left = [
            (entry, match)
            for entry in root.iterdir()
            if (match := pattern.fullmatch(entry.name)) and entry.is_dir()
        ]
    except OSError:
        return []
    if not left:
        return []
    runs = {
        str(run.uuid): run
        for run in Run.objects.filter(uuid__in={m.group(1) for _, m in left}).only(
            "pk", "uuid", "status", "attempts", "launch"
        )
    }
    removed = []
    for scratch, match in left:
        run = runs.get(match.group(1))
        attempt = int(match.group(2))
        waiting = (Run.Status.RUNNING, Run.Status.QUEUED)
        if run is not None and run.status in waiting and run.attempts == attempt:
            continue
        for path in (scratch, _left_workdir(run, scratch.name) if run else None):
            if path is not None and path.is_dir() and not path.is_symlink():
                _remove(path)
                removed.append(str(path))
    if removed:
        log.warning("removed what ended attempts left on this node: %s", ", ".join(removed))
    return removed


def _left_workdir(run: Run, name: str) -> Path | None:
    """The previous attempt's own directory in the run's benchmark directory, when this
    node's policy allows that directory (None otherwise: nothing outside it is touched)."""
    try:
        workdir = LaunchSpec.read(run.launch).workdir
        policy = nodepolicy.current()
    except (LaunchError, ImproperlyConfigured):
        return None
    real = os.path.realpath(workdir) if os.path.isabs(workdir) else ""
    if not real or not policy.allows_dir(real):
        return None
    path = Path(real) / name
    if path.is_symlink() or os.path.dirname(os.path.realpath(path)) != real:
        return None
    return path


@contextlib.contextmanager
def _beating(run: Run):
    """Heartbeats from a thread of their own for as long as the run holds its nodes, not only
    while its tool runs: storing telemetry and verdicts, restoring tuning and waiting for other
    nodes' agents can outlast RUN_STALE_SECONDS on a loaded node, and a run without heartbeats
    loses its nodes to a waiting run (``experiments.execution.holding``) while it is still using
    them. Only
    a dead or frozen worker stops beating. The thread is the worker process's one beater
    (``Beater``), started once: a thread started and joined per run cost a run of a few
    milliseconds two scheduling turns."""
    beater = Beater.get()
    beater.add(run.pk, run.attempts)
    try:
        yield
    finally:
        beater.remove(run.pk)


class Beater:
    """This process's heartbeat thread: every RUN_PROGRESS_SECONDS after a run was added (and
    after each beat since), one heartbeat of that attempt (``_beat_once``) until it is
    removed. A run added and removed within one interval costs no query and no wake-up.

    Once ``remove()`` returned, no beat of that run runs: a beat is decided under the lock
    (the run still registered as it was when it came due), and ``remove()`` waits for the
    beat under way of its run, if any, to end (one short UPDATE that skips a locked row)."""

    _instance: Beater | None = None
    _guard = threading.Lock()

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # run pk -> (attempt, next beat due, registration): a run removed and added again
        # is another registration, whose beats are its own.
        self.runs: dict[int, tuple[int, float, int]] = {}
        self.registrations = itertools.count()
        self.beating: int | None = None  # the run whose beat is under way
        self.beat_ended = threading.Condition(self.lock)
        self.pid = os.getpid()
        self.wakeup = threading.Event()
        self.wakes_at = 0.0
        self.connected = False  # the thread has a database session open
        self.thread = threading.Thread(target=self._loop, name="beeweb-beat", daemon=True)
        self.thread.start()

    @classmethod
    def get(cls) -> Beater:
        """The beater of this process (a forked child starts its own)."""
        with cls._guard:
            beater = cls._instance
            if beater is None or beater.pid != os.getpid() or not beater.thread.is_alive():
                beater = cls._instance = cls()
            return beater

    def add(self, run_id: int, attempt: int) -> None:
        with self.lock:
            due = time.monotonic() + settings.RUN_PROGRESS_SECONDS
            self.runs[run_id] = (attempt, due, next(self.registrations))
            # The thread wakes at least every interval, so it sees this due time in time
            # and is not woken (only a shorter interval than it sleeps for wakes it).
            if due < self.wakes_at:
                self.wakeup.set()

    def remove(self, run_id: int) -> None:
        """Stop beating for the run; a beat of it under way ends before this returns."""
        with self.lock:
            self.runs.pop(run_id, None)
            while self.beating == run_id:
                self.beat_ended.wait()
            # A thread that beat holds a database session: it closes it now rather than
            # at its next wake (a run that never beat costs no wake-up).
            if not self.runs and self.connected:
                self.wakeup.set()

    def _loop(self) -> None:
        wait = settings.RUN_PROGRESS_SECONDS
        while True:
            with self.lock:
                self.wakes_at = time.monotonic() + wait
            self.wakeup.wait(max(wait, 0.001))
            self.wakeup.clear()
            interval = settings.RUN_PROGRESS_SECONDS
            now = time.monotonic()
            with self.lock:
                due = [(pk, entry) for pk, entry in self.runs.items() if entry[1] <= now]
            for pk, entry in due:
                with self.lock:
                    # Removed (or removed and added again) since it came due: no beat.
                    if self.runs.get(pk) != entry:
                        continue
                    self.beating = pk
                try:
                    self.connected = True
                    _beat_once(pk, entry[0])
                except DatabaseError as exc:  # a busy SQLite file, a lost connection
                    log.debug("heartbeat of run %s skipped: %s", pk, exc)
                    connection.close()
                except Exception:  # the next interval tries again
                    log.exception("heartbeat of run %s failed", pk)
                finally:
                    with self.lock:
                        self.beating = None
                        self.beat_ended.notify_all()
                        if self.runs.get(pk) == entry:
                            self.runs[pk] = (entry[0], time.monotonic() + interval, entry[2])
            with self.lock:
                pending = [at for _, at, _ in self.runs.values()]
            if not pending and self.connected:
                connection.close()  # no run to beat for: no database session held
                self.connected = False
            now = time.monotonic()
            wait = min([interval, *(at - now for at in pending)])


def _beat_once(run_id: int, attempt: int) -> None:
    """One heartbeat of this attempt of the run, if it still runs. On PostgreSQL a row that
    another transaction holds locked is skipped rather than waited for (the executor's own
    writes are short; the next beat comes within RUN_PROGRESS_SECONDS)."""
    now = clock.now()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE experiments_run SET heartbeat_at = %s WHERE id = (SELECT id FROM "
                "experiments_run WHERE id = %s AND status = %s AND attempts = %s "
                "FOR UPDATE SKIP LOCKED)",
                [now, run_id, Run.Status.RUNNING, attempt],
            )
        return
    Run.objects.filter(pk=run_id, status=Run.Status.RUNNING, attempts=attempt).update(
        heartbeat_at=now
    )


def _hold(attempt: Attempt) -> Outcome | None:
    """Wait until the run holds all its nodes (None), writing heartbeats and why it waits;
    the outcome when it is cancelled or deleted meanwhile. ``started_at`` becomes the moment
    the nodes are held: the time before it is waiting, not running."""
    run = attempt.run
    names = holding.nodes_for(run)
    last_write = time.monotonic()
    outage = Outage(run, "waiting for its nodes", pause=False)
    while True:
        try:
            stopped = _hold_once(attempt, names, last_write)
        except TRANSIENT as exc:  # the database went away: wait for it, as for the nodes
            outage.failed(exc)
            time.sleep(holding.POLL_SECONDS)
            continue
        outage.ended()
        if stopped is None or stopped[0] is not None:
            return stopped and stopped[0]
        last_write = stopped[1]
        time.sleep(holding.POLL_SECONDS)


def _hold_once(
    attempt: Attempt, names: list[str], last_write: float
) -> tuple[Outcome | None, float] | None:
    """One try of ``_hold``: None once the run holds its nodes; else (the outcome when it is
    cancelled or deleted, or None to wait on; the time of the last heartbeat written)."""
    run = attempt.run
    got, why = holding.try_acquire(run, names)  # marks the run as waiting, or not
    if got:
        now = clock.now()
        attempt.update(waiting_for="", nodes_held=names, started_at=now, heartbeat_at=now)
        attempt.held = True
        return None
    tick = time.monotonic()
    if tick - last_write >= settings.RUN_PROGRESS_SECONDS:
        last_write = tick
        now = clock.now()
        if not attempt.update(heartbeat_at=now):
            return (Run.Status.CANCELLED, "", None, "the run was deleted while it waited"), tick
        Worker.objects.filter(name=run.worker).update(last_seen=now)
    if Run.objects.filter(pk=run.pk, cancel_requested=True).exists():
        attempt.update(waiting_for="")
        return (
            Run.Status.CANCELLED,
            "",
            None,
            f"cancelled while it waited for its nodes ({why})",
        ), last_write
    return None, last_write


def _attempt(attempt: Attempt) -> None:
    """The attempt once the run holds its nodes: its directories, the tool, the outcome."""
    try:
        workdir = _run_dir(attempt.run, attempt.worker)
    except Refused as exc:
        _finish(attempt, Run.Status.FAILED, "", None, str(exc))
        return
    created = [workdir]
    try:
        scratch = Path(settings.RUN_DIR) / workdir.name
        # Private: hostfiles, job files and the tool's log are nobody else's business, also
        # when BEEWEB_RUN_DIR lies outside the (0700) data directory.
        try:
            scratch.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            scratch.mkdir(mode=0o700)
        except OSError as exc:
            error = f"could not create {scratch}: {exc}"
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                error = f"the data directory's file system is full: {error}{_free(scratch.parent)}"
            outcome = (Run.Status.FAILED, "", None, error)
        else:
            created.append(scratch)
            outcome = _run_in(attempt, workdir, scratch)
    except BaseException:
        _remove_beating(attempt, created)
        raise
    # The directories go once the raw output is stored, before the outcome is.
    _finish(attempt, *outcome, remove=created)


def _remove_beating(attempt: Attempt, paths: list[Path]) -> None:
    """Remove ``paths`` before the outcome is stored (a finished run leaves nothing on the
    node), writing heartbeats meanwhile: removing a large mdtest tree can outlast
    RUN_STALE_SECONDS, and the janitor must not take the run for orphaned. Small directories
    (``_small``) go at once, without the thread."""
    if all(_small(path) for path in paths):
        for path in paths:  # at once: a thread costs more than the removal
            _remove(path)
        return
    remover = threading.Thread(target=lambda: [_remove(path) for path in paths], daemon=True)
    remover.start()
    outage = Outage(attempt.run, "a heartbeat while its directories are removed", pause=False)
    while remover.is_alive():
        remover.join(settings.RUN_PROGRESS_SECONDS)
        if remover.is_alive():
            try:
                attempt.update(heartbeat_at=clock.now())
            except TRANSIENT as exc:
                outage.failed(exc)
            else:
                outage.ended()


def _small(path: Path, most: int = 64) -> bool:
    """A directory of at most ``most`` entries and no subdirectory (a dd's file and a log):
    removed in a moment."""
    try:
        with os.scandir(path) as entries:
            for count, entry in enumerate(entries):
                if count >= most or entry.is_dir(follow_symlinks=False):
                    return False
    except OSError:
        return False
    return True


def _run_in(attempt: Attempt, workdir: Path, scratch: Path) -> Outcome:
    """Build the command for the run's directory, apply the tuning the node allows, run the
    preparation steps and the tool; (status, output, exit code, error). Every OS setting
    applied is restored before this returns, whatever happened. A Slurm-mode run first gets
    its nodes from Slurm (``experiments.execution.allocation``)."""
    run = attempt.run
    try:
        spec = replace(LaunchSpec.read(run.launch), workdir=str(workdir))
        adapter = get_adapter(run.tool)
    except ParamError as exc:
        return Run.Status.FAILED, "", None, f"invalid parameters: {exc}"
    except LaunchError as exc:
        return Run.Status.FAILED, "", None, str(exc)
    if spec.mode == "slurm":
        attempt.started = True  # an allocation is asked for: not taken up again from scratch
        return allocation.run_in_slurm(
            attempt,
            spec,
            adapter,
            _tool_params(run),
            lambda inner, job: _build_and_run(attempt, inner, adapter, scratch, job),
        )
    return _build_and_run(attempt, spec, adapter, scratch)


def _build_and_run(
    attempt: Attempt,
    spec: LaunchSpec,
    adapter: Any,
    scratch: Path,
    job: allocation.Job | None = None,
) -> Outcome:
    """The command built for ``spec`` (inside Slurm job ``job`` when given: its steps, its
    nodes' cache drop, its scancel when the run is stopped), the node's configuration
    recorded, tuning applied, then the steps and the tool."""
    run = attempt.run
    try:
        ctx = spec.context(scratch, slurm_job=job.id if job else "")
        command = adapter.build(_tool_params(run), ctx)
        _check_paths(command, ctx)
        if job:
            command = slurm.as_steps(command, job.id, spec.mode)
    except ParamError as exc:
        return Run.Status.FAILED, "", None, f"invalid parameters: {exc}"

    config = nodeconfig.read(ctx.workdir, adapter.version_argv())
    config["run_dir"] = str(ctx.workdir)
    applied: list[dict[str, str]] = []
    if spec.apply_tuning:
        attempt.started = True  # the node's settings change: not taken up again from scratch
        allowed = nodepolicy.current().tuning
        applied = config["applied"] = nodeconfig.apply_tuning(
            _tuning_for(run, spec), ctx.workdir, allowed
        )
    # The tuning set's BeeGFS server keys, made true on the held servers by their own
    # workers (and files beeweb changed for another run put back), before anything runs.
    servers, error = beegfs.prepare(
        run,
        _tuning_for(run, spec) if spec.apply_tuning else {},
        agent.own_node(run),
        lambda: _beat(attempt),
        agent.with_agents,
    )
    if servers is not None:
        config["beegfs"] = servers
    if error:
        if applied:
            nodeconfig.restore_tuning(applied)
        attempt.update(effective_config=config)
        if error == "cancelled":
            return Run.Status.CANCELLED, "", None, "cancelled while its servers were tuned"
        return Run.Status.FAILED, "", None, error
    launch = record_launch(run.launch, run.params, command.parse_options)
    attempt.stage(  # written as the tool starts (or by the first step that writes before)
        argv=command.argv,
        command=" ".join(command.argv),
        effective_config=config,
        tool_version=(config.get("tool_version") or "")[:60],
        launch=launch,
    )
    try:
        return _run_steps(
            attempt,
            spec,
            command,
            ctx,
            config,
            drop=job.drop_caches if job else None,
            on_stop=job.stop if job else None,
        )
    finally:
        if applied:
            nodeconfig.restore_tuning(applied)
            attempt.update(effective_config=config)


def _tool_params(run: Run) -> dict[str, Any]:
    """The run's parameters without the launch's (``runners.launch.LAUNCH_PARAMS``)."""
    return tool_params(run.params)


def _run_steps(
    attempt: Attempt,
    spec: LaunchSpec,
    command: Command,
    ctx: Any,
    config: dict[str, Any],
    drop: Callable[[], Any] | None = None,
    on_stop: Callable[[], None] | None = None,
) -> Outcome:
    """Preparation steps, the cache drop on every node (each held node by its own worker's
    node agent, experiments.execution.agent; ``drop`` adds a Slurm run's allocated nodes,
    dropped through the allocation), then the measured command, under one timeout.
    ``on_stop`` runs before a cancelled, timed-out or deleted run's process group is killed."""
    run = attempt.run
    timeout_s = spec.timeout_s or 3600
    deadline = time.monotonic() + timeout_s
    try:
        _lay_out(command, ctx)
    except OSError as exc:
        return Run.Status.FAILED, "", None, f"could not lay out the run's directory: {exc}"
    for index, argv in enumerate(command.prepare):
        step = replace(command, argv=argv, prepare=[])
        status, output, exit_code, error = _supervise(
            attempt,
            step,
            ctx.scratch,
            timeout_s,
            deadline,
            f"prepare-{index}.log",
            stream=False,
            on_stop=on_stop,
        )
        config.setdefault("prepare", []).append(
            {"argv": argv, "exit_code": exit_code, "output": output[-HISTORY_BYTES:]}
        )
        attempt.update(effective_config=config)
        if status != Run.Status.SUCCEEDED:
            return status, "", exit_code, f"preparation step {' '.join(argv)}: {error}"
    if spec.drop_caches:
        # Every node the run holds drops its caches, each by its own worker
        # (experiments.execution.agent);
        # a Slurm run's allocated nodes drop theirs through the allocation.
        drops = agent.drop_caches(run, list(run.nodes_held or []), lambda: _beat(attempt))
        if drops is None:
            return Run.Status.CANCELLED, "", None, "cancelled while its nodes dropped caches"
        if drop is not None:
            drops.update(drop())
        config["drop_caches"] = drops
        attempt.update(effective_config=config)
    # This node's counters while the tool runs (the tool is a child of the reaper).
    with telemetry.recording(
        run, ctx.scratch, watch_pid=reaper.reaper().pid, keep=attempt.keep_telemetry, lazy=True
    ) as keep_sampling:
        _sampling(run, agent.start_sampling)  # and the other held nodes', by their agents
        try:
            status, output, exit_code, error = _supervise(
                attempt,
                command,
                ctx.scratch,
                timeout_s,
                deadline,
                on_stop=on_stop,
                running=keep_sampling,
            )
        finally:
            _sampling(run, agent.stop_sampling)
    full = _data_full(ctx.scratch)
    if full and status != Run.Status.CANCELLED:
        # What the tool wrote into its log and result files there may be cut short: what
        # was written is still stored as the raw output, but the run is no result.
        status, error = Run.Status.FAILED, full + (f"; {error}" if error else "")
    if command.output_file and Path(command.output_file).exists():
        # The tool's result file is what parses; the console output stays in history.
        result_text = Path(command.output_file).read_text(errors="replace")
        output = result_text if result_text.strip() else output
    return status, output, exit_code, error


def _sampling(run: Run, change: Callable[[Run], int]) -> None:
    """Start or stop the other nodes' sampling; like the launcher's own telemetry, never the
    run's outcome (the leases go when the attempt ends, which stops their agents anyway)."""
    try:
        change(run)
    except Exception:
        log.exception("run %s: could not %s", run.pk, change.__name__.replace("_", " "))


def _beat(attempt: Attempt) -> bool:
    """A heartbeat of the run (and its worker) while it waits for something other than its
    tool; False when the run was deleted or a cancel was asked."""
    run = attempt.run
    now = clock.now()
    if not attempt.update(heartbeat_at=now):
        return False
    Worker.objects.filter(name=run.worker).update(last_seen=now)
    return not Run.objects.filter(pk=run.pk, cancel_requested=True).exists()


def _tuning_for(run: Run, spec: LaunchSpec) -> dict[str, str]:
    values = dict(run.tuning_set.effective) if run.tuning_set else {}
    values.update(spec.tuning)
    return values


def _supervise(
    attempt: Attempt,
    command: Command,
    scratch: Path,
    timeout_s: int,
    deadline: float,
    log_name: str = "output.log",
    stream: bool = True,
    on_stop: Callable[[], None] | None = None,
    running: Callable[[], None] | None = None,
) -> Outcome:
    """Start the tool and watch it until it ends, ``deadline`` (monotonic) passes or the run
    is cancelled; (status, output, exit code, error). ``stream`` stores the output on the run
    as it grows (not for preparation steps, whose output is not the run's). ``on_stop`` runs
    before the process group is killed (a Slurm run's scancel); ``running`` once the tool
    outlasts its first wait (the sampling thread starts)."""
    run = attempt.run
    log_path = scratch / log_name
    spawner = reaper.reaper()
    attempt.started = True
    try:
        pid = spawner.spawn(command.argv, command.cwd, {**os.environ, **command.env}, log_path)
    except reaper.SpawnError as exc:
        # As a shell would: the reason in the output, exit status 127.
        return Run.Status.FAILED, f"{exc}\n", 127, str(exc)
    attempt.stage(pid=pid)  # written with the first heartbeat, or with the outcome
    log.info("run %s attempt %s: started %s (pid %s)", run.pk, run.attempts, log_name, pid)
    last_write = time.monotonic()
    last_size = -1
    reason = ""
    outage = Outage(run, "a heartbeat of its running tool", pause=False)
    exit_code: int | None = None

    def kill() -> int | None:
        if on_stop is not None:
            on_stop()
        return _kill_group(spawner, pid)

    try:
        while True:
            try:
                exit_code = spawner.wait(pid, 0.5)
            except reaper.ReaperGone:
                reason = "the worker's reaper process ended; the process group was killed"
                _kill_group(None, pid)
                break
            if exit_code is not None:
                break
            if running is not None:
                running()
                running = None
            now = time.monotonic()
            if now > deadline:
                reason = f"timed out after {timeout_s} s; the process group was killed"
                exit_code = kill()
                break
            if now - last_write >= settings.RUN_PROGRESS_SECONDS or attempt.staged:
                last_write = now
                fields: dict[str, Any] = {"heartbeat_at": clock.now()}
                if stream:
                    size = log_path.stat().st_size
                    if size != last_size:
                        fields["raw_output"] = _read(log_path)
                try:
                    alive = attempt.update(**fields)
                    # A solo-pool worker's own heartbeat timer waits while the task runs.
                    Worker.objects.filter(name=run.worker).update(last_seen=fields["heartbeat_at"])
                    cancelled = (
                        alive and Run.objects.filter(pk=run.pk, cancel_requested=True).exists()
                    )
                except TRANSIENT as exc:
                    # The database went away (a restart, a failover): the tool goes on, its
                    # output stays in its log, and the next interval tries again (the
                    # janitor takes the run if its heartbeats stop for RUN_STALE_SECONDS).
                    outage.failed(exc)
                    continue
                outage.ended()
                if stream:
                    last_size = size
                if not alive:
                    reason = (
                        "the run was deleted, or taken from this attempt after its heartbeats "
                        "stopped, while it ran; the process group was killed"
                    )
                    exit_code = kill()
                    break
                if cancelled:
                    reason = "cancelled while running; the process group was killed"
                    exit_code = kill()
                    break
    except BaseException:
        # The supervision failed (a database error past its retries, the task killed by a
        # signal): the tool must not outlive it, writing to the disks unwatched.
        log.warning(
            "run %s: supervision of pid %s failed; its process group is killed", run.pk, pid
        )
        with contextlib.suppress(Exception):
            _kill_group(spawner, pid)
        raise
    output = _read(log_path)
    if reason.startswith("cancelled"):
        return Run.Status.CANCELLED, output, exit_code, reason
    if reason:
        return Run.Status.FAILED, output, exit_code, reason
    if exit_code != 0:
        error = f"{command.argv[0]} exited with {exit_code}"
        return (
            Run.Status.FAILED,
            output,
            exit_code,
            error + _reason(command) + _full(command, output),
        )
    return Run.Status.SUCCEEDED, output, exit_code, ""


# What a tool prints for ENOSPC (strerror(28)): dd, fio, IOR and mdtest alike.
NO_SPACE = os.strerror(errno.ENOSPC)


def _full(command: Command, output: str) -> str:
    """``; the benchmark directory's file system is full ...`` when the tool failed for want
    of space (its output says ``No space left on device``), naming the run's directory and
    what its file system has free as the tool ended (before the directory is removed, which
    frees what the run wrote); empty otherwise."""
    if NO_SPACE not in output or not command.cwd:
        return ""
    try:
        stat = os.statvfs(command.cwd)
    except OSError:
        return f"; the benchmark directory's file system is full ({command.cwd}: {NO_SPACE})"
    free, size = stat.f_bavail * stat.f_frsize, stat.f_blocks * stat.f_frsize
    return (
        f"; the benchmark directory's file system is full: {command.cwd} had "
        f"{_size(free)} free of {_size(size)} when the tool ended (what the run wrote is "
        "removed with its directory; a benchmark that needs more space needs a larger "
        "benchmark directory or a smaller size)"
    )


# The data directory's file system counts as full when less than this is free (for
# unprivileged writers) as a tool ends: its console log and result files, written there,
# may have been cut short.
DATA_FULL_BYTES = 64 * 1024


def _data_full(scratch: Path) -> str:
    """``the data directory's file system is full: ...`` when the file system of the run's
    scratch directory (under BEEWEB_RUN_DIR), where its tool's console log and result files
    are written, had less than DATA_FULL_BYTES free as the tool ended; empty otherwise."""
    try:
        stat = os.statvfs(scratch)
    except OSError:
        return ""
    free = stat.f_bavail * stat.f_frsize
    if free >= DATA_FULL_BYTES:
        return ""
    return (
        f"the data directory's file system is full: {scratch} had {_size(free)} free of "
        f"{_size(stat.f_blocks * stat.f_frsize)} when the tool ended, so its console log and "
        "result files may be cut short (what was written is stored as the raw output; the "
        "run is not a result: free space under BEEWEB_RUN_DIR and re-run it)"
    )


def _free(path: Path) -> str:
    """`` (N free of M)`` of ``path``'s file system; empty when it cannot be read."""
    try:
        stat = os.statvfs(path)
    except OSError:
        return ""
    return (
        f" ({_size(stat.f_bavail * stat.f_frsize)} free of {_size(stat.f_blocks * stat.f_frsize)})"
    )


def _size(count: float) -> str:
    if count < 1024:
        return f"{int(count)} bytes"
    for unit in ("KiB", "MiB"):
        count /= 1024
        if count < 1024:
            return f"{count:.1f} {unit}"
    return f"{count / 1024:.1f} GiB"


def _reason(command: Command) -> str:
    """Why the tool failed, as it wrote in its ``Command.reason_file`` (StorageBench's driver:
    in BeeGFS's words), as ``: <why>`` to follow the exit status; empty without one."""
    if command.reason_file is None:
        return ""
    try:
        with open(command.reason_file, encoding="utf-8", errors="replace") as fh:
            text = fh.read(4096).strip()
    except OSError:
        return ""
    return f": {text}" if text else ""


def _read(path: Path, most: int = MAX_OUTPUT_BYTES) -> str:
    """The last ``most`` bytes of the file, as text."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - most))
        return fh.read().decode("utf-8", errors="replace")


# --- Janitor ------------------------------------------------------------------------------
