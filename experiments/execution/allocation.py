"""A Slurm-mode attempt's allocation: the run's nodes asked of Slurm with ``salloc``, the
pending job waited for (heartbeats, cancel), the job id, its state and reason and the
allocated nodes recorded on the run, the attempt's steps and tool run inside the job
(``experiments.execution.execute`` builds and supervises them; ``scancel`` when beeweb ends
the job), Slurm's verdict taken when Slurm ended the job, and the allocation released with
its final state recorded, whatever happened. ``runners.slurm`` builds the argv and reads
Slurm's answers (Django-free); this module is what the executor does with them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings

from experiments.execution.attempt import Attempt, Outcome
from experiments.models import Run, Worker
from experiments.shared import clock
from runners import slurm
from runners.launch import LaunchSpec
from runners.tools.base import ParamError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """The Slurm job an attempt runs in: its id, its allocated nodes, and ``stop`` (scancel),
    which runs before a cancelled, timed-out or deleted run's process group is killed."""

    id: str
    nodes: list[str]
    stop: Callable[[], None]

    def drop_caches(self) -> dict[str, str]:
        """Each allocated node's cache drop, through the allocation (``runners.slurm``)."""
        return slurm.drop_caches(self.id, self.nodes)


def run_in_slurm(
    attempt: Attempt,
    spec: LaunchSpec,
    adapter: Any,
    params: dict[str, Any],
    inside: Callable[[LaunchSpec, Job], Outcome],
) -> Outcome:
    """The attempt inside a Slurm allocation of its own (``runners.slurm``): allocate, record
    the job and its nodes, run ``inside`` (the steps and the tool, built for the inner spec:
    the tool's inner mode on the allocated hosts, Slurm's time limit plus a grace as the
    timeout), and end with Slurm's verdict when Slurm ended the job. ``params``: the tool's
    parameters, validated before Slurm is asked for anything. The allocation is released
    (and its final state recorded) whatever happened."""
    run = attempt.run
    inner = slurm.inner_mode(adapter.modes)
    if inner is None:
        return Run.Status.FAILED, "", None, f"{run.tool} cannot run in Slurm mode"
    try:
        adapter.validate(params)  # before Slurm is asked for anything
    except ParamError as exc:
        return Run.Status.FAILED, "", None, f"invalid parameters: {exc}"
    try:
        argv = slurm.salloc_argv(
            run.pk,
            nodes=spec.nodes,
            tasks_per_node=spec.tasks_per_node,
            partition=spec.partition,
            account=spec.account,
            timeout_s=spec.timeout_s or 3600,
        )
    except ParamError as exc:
        return Run.Status.FAILED, "", None, f"invalid Slurm settings: {exc}"
    allocation = slurm.Allocation(argv)
    stopped = threading.Event()  # cancelled, timed out or deleted: beeweb ended the job

    def stop() -> None:
        if allocation.job_id:
            stopped.set()
            slurm.cancel(allocation.job_id)

    try:
        allocation.start()
        waited = _allocate(attempt, allocation)
        if waited is not None:
            return waited
        job_id = str(allocation.job_id)
        job = slurm.show_job(job_id)
        names = slurm.hostnames(job.nodelist)
        hosts = slurm.hosts_of(names)
        attempt.update(
            slurm_job_id=job_id,
            slurm_state=job.state,
            slurm_reason=job.reason,
            slurm_nodes=names,
            launch={**run.launch, "hosts": [[h.name, h.address] for h in hosts]},
        )
        # Slurm's time limit ends the job before the executor's own deadline does.
        timeout_s = slurm.minutes(spec.timeout_s or 3600) * 60 + slurm.GRACE_SECONDS
        inner_spec = replace(spec, mode=inner, hosts=hosts, timeout_s=timeout_s)
        status, output, exit_code, error = inside(
            inner_spec, Job(id=job_id, nodes=[h.name for h in hosts], stop=stop)
        )
        if stopped.is_set():
            error = f"{error}; Slurm job {job_id} cancelled (scancel)"
        elif status != Run.Status.SUCCEEDED:
            job = slurm.settled(job_id)
            if not job.live:
                error = f"Slurm ended job {job_id}: {job.describe()}"
                status = Run.Status.FAILED
        return status, output, exit_code, error
    except slurm.SlurmError as exc:
        return Run.Status.FAILED, allocation.output(), None, f"Slurm: {exc}"
    finally:
        allocation.release()
        _record_job(attempt, allocation.job_id)


def _allocate(attempt: Attempt, allocation: Any) -> Outcome | None:
    """Wait until Slurm grants the allocation (None), writing heartbeats and the pending job;
    the outcome when salloc fails or the run is cancelled or deleted meanwhile (a pending
    job is then cancelled)."""
    run = attempt.run
    last_write = time.monotonic()
    while not allocation.granted.wait(0.2):
        if allocation.job_id and run.slurm_job_id != allocation.job_id:
            attempt.update(
                slurm_job_id=allocation.job_id,
                slurm_state="PENDING",
                waiting_for=f"waiting for Slurm to allocate job {allocation.job_id}",
            )
        if allocation.ended:
            allocation.release()  # reads the rest of its output
            if allocation.granted.is_set():
                break
            lines = allocation.output().splitlines()
            why = lines[-1] if lines else f"exit status {allocation.proc.returncode}"
            return (
                Run.Status.FAILED,
                allocation.output(),
                allocation.proc.returncode,
                f"Slurm refused the allocation: {why}",
            )
        tick = time.monotonic()
        if tick - last_write < settings.RUN_PROGRESS_SECONDS:
            continue
        last_write = tick
        now = clock.now()
        alive = attempt.update(heartbeat_at=now)
        Worker.objects.filter(name=run.worker).update(last_seen=now)
        cancel = alive and Run.objects.filter(pk=run.pk, cancel_requested=True).exists()
        if not alive or cancel:
            if allocation.job_id:
                slurm.cancel(allocation.job_id)
            what = f"Slurm job {allocation.job_id}" if allocation.job_id else "the allocation"
            if not alive:
                return Run.Status.CANCELLED, "", None, f"the run was deleted; {what} cancelled"
            return Run.Status.CANCELLED, "", None, f"cancelled while {what} was pending"
    attempt.update(waiting_for="", slurm_job_id=str(allocation.job_id))
    return None


def _record_job(attempt: Attempt, job_id: str | None) -> None:
    """The job's final state and reason, once salloc has let it go."""
    if not job_id:
        return
    try:
        job = slurm.settled(job_id, wait=5.0)
    except slurm.SlurmError as exc:
        log.warning("run %s: could not read Slurm job %s: %s", attempt.run.pk, job_id, exc)
        return
    attempt.update(slurm_state=job.state, slurm_reason=job.reason)
