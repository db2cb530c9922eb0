"""Running one benchmark run on this node: claim it, prepare the node, start the tool in its
own process group, stream its output into the database, stop it on timeout or cancel, then
store the raw output *before* parsing it.

Invariants:
- A delivery whose dispatch token is not the run's current token does nothing (duplicate
  delivery, or a message the janitor already replaced).
- The tool never outlives its worker: it runs under ``runners.reaper``, which kills the
  tool's whole process group when the worker process dies, so a worker killed mid-run
  leaves no orphan writing to the disks.
- Raw output reaches the database every ``RUN_PROGRESS_SECONDS`` while the tool runs and in
  full when it ends, whatever the exit status.
"""

from __future__ import annotations

import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from experiments.importing import MAX_IMPORT_BYTES
from experiments.ingest import replace_metrics
from experiments.matrices import context_from_launch
from experiments.models import Run, Worker
from runners import nodeconfig
from runners.parsers import ParseError, parse
from runners.tools import get_adapter
from runners.tools.base import Command, ParamError

log = logging.getLogger(__name__)

KILL_GRACE_SECONDS = 5.0
REAPER = Path(__file__).resolve().with_name("reaper.py")
# Output of earlier attempts kept on the run when it is requeued (per attempt).
HISTORY_BYTES = 64 * 1024


def _code_root(env: dict[str, str]) -> str:
    """PYTHONPATH that lets the reaper shim import ``runners`` from any working directory."""
    root = str(Path(__file__).resolve().parents[1])
    return os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)


def claim(run_id: int, token: str, worker: str) -> Run | None:
    """Mark the run as running by this worker, or None when this delivery is stale."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            log.warning("run %s no longer exists; delivery ignored", run_id)
            return None
        if run.status != Run.Status.QUEUED or str(run.dispatch_token) != str(token):
            log.info("run %s: stale delivery (status %s); ignored", run_id, run.status)
            return None
        now = timezone.now()
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
        run.save()
        return run


def _update(run: Run, **fields: Any) -> None:
    fields.setdefault("updated", timezone.now())
    Run.objects.filter(pk=run.pk).update(**fields)
    for key, value in fields.items():
        setattr(run, key, value)


def _finish(run: Run, status: str, output: str, exit_code: int | None, error: str) -> None:
    """Store the outcome: raw output first (the run still shows as running), then the parsed
    metrics, then the final status."""
    _update(
        run,
        raw_output=output[-MAX_IMPORT_BYTES:],
        exit_code=exit_code,
        finished_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    if output.strip():
        parse_run_output(run)
    if status == Run.Status.SUCCEEDED and run.parse_error:
        status = Run.Status.FAILED
        error = f"the output could not be parsed: {run.parse_error}"
    _update(run, status=status, error=error)


def parse_run_output(run: Run) -> None:
    """Parse the stored raw output into metrics; parameters the matrix set stay as they are
    and the parser's own (threads, transfer_size, …) are added."""
    options = dict(run.launch.get("parse_options") or {})
    try:
        result = parse(run.raw_output, tool=run.tool, **options)
    except ParseError as exc:
        _update(run, parse_error=str(exc))
        return
    params = {**result.params, **run.params}
    with transaction.atomic():
        _update(run, tool_version=(result.tool_version or "")[:60], params=params, parse_error="")
        replace_metrics(run, [m.to_dict() for m in result.metrics])


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=KILL_GRACE_SECONDS)
            return
        except subprocess.TimeoutExpired:
            continue


def _prepare(command: Command, scratch: Path) -> None:
    scratch.mkdir(parents=True, exist_ok=True)
    for path, content in command.files.items():
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)


def _cleanup(command: Command, scratch: Path) -> None:
    for path in command.cleanup:
        path = Path(path)
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("could not remove %s: %s", path, exc)


def execute(run_id: int, token: str, worker: str) -> str:
    """Run one benchmark run to its end; returns the final status (or "stale").
    (Celery's Django fix-up closes stale database connections around each task.)"""
    run = claim(run_id, token, worker)
    if run is None:
        return "stale"
    scratch = Path(settings.RUN_DIR) / str(run.uuid)
    launch = run.launch
    try:
        adapter = get_adapter(run.tool)
        ctx = context_from_launch(launch, scratch, run_as_root=os.geteuid() == 0)
        tool_params = {
            k: v for k, v in run.params.items() if not k.startswith("tuning:") and k != "target"
        }
        command = adapter.build(tool_params, ctx)
    except ParamError as exc:
        _finish(run, Run.Status.FAILED, "", None, f"invalid parameters: {exc}")
        return Run.Status.FAILED
    if not Path(ctx.workdir).is_dir():
        _finish(
            run,
            Run.Status.FAILED,
            "",
            None,
            f"benchmark directory {ctx.workdir} does not exist on {worker}",
        )
        return Run.Status.FAILED

    config = nodeconfig.read(ctx.workdir, adapter.version_argv())
    if launch.get("apply_tuning"):
        config["applied"] = nodeconfig.apply_tuning(_tuning_for(run), ctx.workdir)
    if launch.get("drop_caches"):
        config["drop_caches"] = nodeconfig.drop_caches()
    launch = {**launch, "parse_options": command.parse_options}
    _update(
        run,
        argv=command.argv,
        command=" ".join(command.argv),
        effective_config=config,
        tool_version=(config.get("tool_version") or "")[:60],
        launch=launch,
    )
    _prepare(command, scratch)
    try:
        status, output, exit_code, error = _supervise(
            run, command, scratch, int(launch.get("timeout_s") or 3600)
        )
        if command.output_file and Path(command.output_file).exists():
            # The tool's result file is what parses; the console output stays in history.
            result_text = Path(command.output_file).read_text(errors="replace")
            output = result_text if result_text.strip() else output
        _finish(run, status, output, exit_code, error)
    finally:
        _cleanup(command, scratch)
    return run.status


def _tuning_for(run: Run) -> dict[str, str]:
    values = dict(run.tuning_set.effective) if run.tuning_set else {}
    values.update(run.launch.get("tuning") or {})
    return values


def _supervise(
    run: Run, command: Command, scratch: Path, timeout_s: int
) -> tuple[str, str, int | None, str]:
    """Start the tool and watch it; (status, output, exit code, error)."""
    log_path = scratch / "output.log"
    env = {**os.environ, **command.env}
    with open(log_path, "wb") as log_file:
        try:
            # The shim needs the standard library only: run it by path in isolated mode
            # without site-packages (-I -S); -m and site cost more than the shim's own work
            # (~27 ms -> ~17 ms per run).
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), "--", *command.argv],
                cwd=command.cwd,
                env={**env, "PYTHONPATH": _code_root(env)},
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            return Run.Status.FAILED, "", None, f"could not start {command.argv[0]}: {exc}"
    _update(run, pid=proc.pid)
    started = time.monotonic()
    last_write = 0.0
    last_size = -1
    reason = ""
    exited = _exit_waiter(proc)
    while True:
        if exited(0.5):
            break
        now = time.monotonic()
        if now - started > timeout_s:
            reason = f"timed out after {timeout_s} s; the process group was killed"
            _kill_group(proc)
            break
        if now - last_write >= settings.RUN_PROGRESS_SECONDS:
            last_write = now
            size = log_path.stat().st_size
            fields: dict[str, Any] = {"heartbeat_at": timezone.now()}
            if size != last_size:
                last_size = size
                fields["raw_output"] = _read(log_path)
            _update(run, **fields)
            # A solo-pool worker's own heartbeat timer waits while the task runs.
            Worker.objects.filter(name=run.worker).update(last_seen=fields["heartbeat_at"])
            if Run.objects.filter(pk=run.pk, cancel_requested=True).exists():
                reason = "cancelled while running; the process group was killed"
                _kill_group(proc)
                break
    output = _read(log_path)
    exit_code = proc.returncode
    if reason.startswith("cancelled"):
        return Run.Status.CANCELLED, output, exit_code, reason
    if reason:
        return Run.Status.FAILED, output, exit_code, reason
    if exit_code == 127 and output.startswith("could not start"):
        return Run.Status.FAILED, output, exit_code, output.strip().splitlines()[0]
    if exit_code != 0:
        return Run.Status.FAILED, output, exit_code, f"{command.argv[0]} exited with {exit_code}"
    return Run.Status.SUCCEEDED, output, exit_code, ""


def _exit_waiter(proc: subprocess.Popen):
    """A function ``wait(timeout) -> bool``: whether ``proc`` has exited, waiting up to
    ``timeout`` seconds. On Linux it sleeps on a pidfd and wakes the moment the process
    exits; ``Popen.wait(timeout)`` polls with sleeps of up to 50 ms, which a run of a
    few milliseconds (dd of 4 KiB) pays in full."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = None

    def wait(timeout: float) -> bool:
        nonlocal pidfd
        if pidfd is None:
            try:
                proc.wait(timeout=timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        select.select([pidfd], [], [], timeout)
        if proc.poll() is None:
            return False
        os.close(pidfd)
        pidfd = None
        return True

    return wait


def _read(path: Path) -> str:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - MAX_IMPORT_BYTES))
        return fh.read().decode("utf-8", errors="replace")


# --- Janitor ------------------------------------------------------------------------------


def janitor(stale_seconds: int | None = None) -> dict[str, int]:
    """Requeue (or, after RUN_MAX_ATTEMPTS, fail) running runs whose worker stopped writing
    heartbeats: a worker killed mid-run must not leave its run stuck as running."""
    from experiments.matrices import dispatch

    stale_seconds = settings.RUN_STALE_SECONDS if stale_seconds is None else stale_seconds
    cutoff = timezone.now() - timezone.timedelta(seconds=stale_seconds)
    requeue: list[int] = []
    failed = 0
    with transaction.atomic():
        for run in Run.objects.select_for_update(skip_locked=True).filter(
            status=Run.Status.RUNNING, heartbeat_at__lt=cutoff
        ):
            reason = (
                f"worker {run.worker or '?'} stopped sending heartbeats during attempt "
                f"{run.attempts} (last {run.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC)"
            )
            if run.attempts < settings.RUN_MAX_ATTEMPTS:
                _update(run, error=f"{reason}; requeued", status=Run.Status.FAILED)
                requeue.append(run.pk)
            else:
                _update(
                    run,
                    status=Run.Status.FAILED,
                    finished_at=timezone.now(),
                    error=f"{reason}; gave up after {run.attempts} attempts",
                )
                failed += 1
        # Runs that were never picked up keep waiting: their node's worker may be down.
    requeued = dispatch(requeue)
    return {"requeued": requeued, "failed": failed}
