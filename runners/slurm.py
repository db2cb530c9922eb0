"""Slurm as a launch mode (issue 14, item 2): for sites where Slurm owns the client nodes.

The launcher's worker asks Slurm for the nodes and runs the tool on them as job steps:

1. ``salloc --job-name=beeweb-run-<pk> --nodes=N --ntasks-per-node=T --exclusive
   --partition=P [--account=A] --time=M cat`` with a pipe as stdin. salloc prints the job id
   (``Granted job allocation 42``), and its command, ``cat`` on the launcher, holds the
   allocation open until the executor closes the pipe: the job then ends COMPLETED, as a job
   should that did its work. (``salloc --no-shell`` would leave it to ``scancel`` to free the
   nodes, and every job would end CANCELLED.) A worker that dies closes the pipe too, so an
   allocation never outlives its worker by more than Slurm's own clean-up.
2. ``scontrol show job -o <id>`` gives the state and NodeList, which ``scontrol show
   hostnames`` expands: the allocated nodes become the run's hosts.
3. Cache drop (when asked), preparation steps and the tool run as steps of the job: ``srun
   --jobid=<id> ...``; MPI tools (ior, mdtest) through ``srun --mpi=pmix`` over every
   allocated node (``runners.tools.base.mpi_launch``), single-process tools as one task on the
   first node (they cannot combine outputs of several nodes, so validation keeps them to one).
4. Cancel runs ``scancel <id>``; a job that Slurm ends (TIMEOUT, PREEMPTED, NODE_FAIL,
   CANCELLED by someone else) fails the run with Slurm's state and reason.

Everything is an argv; nothing passes through a shell. ``sacct`` needs slurmdbd, which a site
may not run: the job's state comes from ``scontrol show job`` (finished jobs stay there for
MinJobAge, 300 s by default).
"""

from __future__ import annotations

import math
import re
import subprocess
import threading
import time
from dataclasses import dataclass, replace

from runners.tools.base import Host, clean_host, clean_int, clean_token

SALLOC = "salloc"
SRUN = "srun"
SCONTROL = "scontrol"
SCANCEL = "scancel"
# Seconds the executor waits beyond the job's Slurm time limit before it stops the step
# itself: Slurm checks time limits periodically (the throw-away test cluster ended a
# --time=1 job after 79 s), and Slurm's own verdict and reason should win.
GRACE_SECONDS = 120
# How long a finished step may leave the job RUNNING/COMPLETING before its state is read
# as final (slurmctld needs a moment to record a time limit or a node failure).
SETTLE_SECONDS = 15.0
RUNNING_GRACE = 2.0  # how long a RUNNING job may take to show that Slurm ended it
COMMAND_TIMEOUT = 30  # scontrol / scancel / a cache-drop step
MAX_NODES = 4096
# States of a job that still holds (or is about to hold) its nodes.
LIVE_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED"})

_JOB_ID_RE = re.compile(r"\bjob allocation (\d+)\b", re.I)
_FIELD_RE = re.compile(r"^([A-Za-z][A-Za-z0-9/:_]*)=(.*)\Z")


class SlurmError(RuntimeError):
    """A Slurm command failed or said something this module cannot read."""


@dataclass(frozen=True)
class Job:
    """What ``scontrol show job -o`` says about a job."""

    job_id: str
    state: str
    reason: str
    nodelist: str  # compressed, e.g. "n[1-2]"; "" while pending

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    def describe(self) -> str:
        """'TIMEOUT (TimeLimit)', or the state alone when Slurm gives no reason."""
        if self.reason and self.reason != "None":
            return f"{self.state} ({self.reason})"
        return self.state


def minutes(timeout_s: int) -> int:
    """Slurm's ``--time`` in whole minutes: the run's timeout rounded up (at least 1)."""
    return max(1, math.ceil(timeout_s / 60))


def salloc_argv(
    run_pk: int,
    *,
    nodes: int,
    tasks_per_node: int,
    partition: str,
    account: str = "",
    timeout_s: int,
    command: tuple[str, ...] = ("cat",),
) -> list[str]:
    """The allocation request of one run (checked values only)."""
    argv = [
        SALLOC,
        f"--job-name=beeweb-run-{clean_int(run_pk, 'run', 1)}",
        f"--nodes={clean_int(nodes, 'slurm_nodes', 1, MAX_NODES)}",
        f"--ntasks-per-node={clean_int(tasks_per_node, 'tasks_per_node', 1, 4096)}",
        "--exclusive",
        f"--partition={clean_token(partition, 'slurm_partition')}",
    ]
    if account:
        argv.append(f"--account={clean_token(account, 'slurm_account')}")
    argv.append(f"--time={minutes(timeout_s)}")
    return argv + list(command)


def job_id_in(text: str) -> str | None:
    """The job id salloc printed ('Granted job allocation 42', 'Pending job allocation 42')."""
    match = _JOB_ID_RE.search(text)
    return match.group(1) if match else None


def step_argv(job_id: str, argv: list[str], *, nodelist: str = "") -> list[str]:
    """``argv`` as one task of job ``job_id`` (on ``nodelist``, else on its first node)."""
    job = clean_int(job_id, "slurm job", 1)
    step = [SRUN, f"--jobid={job}", "--nodes=1", "--ntasks=1", "--kill-on-bad-exit=1"]
    if nodelist:
        step.append(f"--nodelist={clean_host(nodelist, 'hosts')}")
    return step + list(argv)


def parse_show_job(text: str) -> Job:
    """A Job from the one-line output of ``scontrol show job -o <id>``. Values are single
    words except a few free-text ones (Comment, Command, WorkDir...), whose spaces
    continue the previous field."""
    fields: dict[str, str] = {}
    last = None
    for token in text.strip().splitlines()[0].split(" ") if text.strip() else []:
        match = _FIELD_RE.match(token)
        if match and match.group(1) not in fields:
            last = match.group(1)
            fields[last] = match.group(2)
        elif last is not None and token:
            fields[last] += " " + token
    if "JobId" not in fields or "JobState" not in fields:
        raise SlurmError(f"scontrol show job printed no job: {text.strip()[:200]!r}")
    nodelist = fields.get("NodeList", "")
    return Job(
        job_id=fields["JobId"],
        state=fields["JobState"],
        reason=fields.get("Reason", ""),
        nodelist="" if nodelist == "(null)" else nodelist,
    )


def _run(argv: list[str], timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"{' '.join(argv[:3])}: {exc}") from None
    return proc


def show_job(job_id: str) -> Job:
    proc = _run([SCONTROL, "show", "job", "-o", str(clean_int(job_id, "slurm job", 1))])
    if proc.returncode != 0:
        raise SlurmError(f"scontrol show job {job_id}: {(proc.stderr or proc.stdout).strip()}")
    return parse_show_job(proc.stdout)


def hostnames(nodelist: str) -> list[str]:
    """A compressed node list ('n[1-2],gpu3') expanded by ``scontrol show hostnames``."""
    if not nodelist:
        return []
    clean_token(nodelist.replace("[", "").replace("]", ""), "NodeList")  # no option, no space
    proc = _run([SCONTROL, "show", "hostnames", nodelist])
    if proc.returncode != 0:
        raise SlurmError(f"scontrol show hostnames {nodelist}: {proc.stderr.strip()}")
    return [clean_host(name, "NodeList") for name in proc.stdout.split()]


def cancel(job_id: str) -> str:
    """``scancel <id>``; '' or what scancel said when it failed."""
    try:
        proc = _run([SCANCEL, str(clean_int(job_id, "slurm job", 1))])
    except SlurmError as exc:
        return str(exc)
    return "" if proc.returncode == 0 else (proc.stderr or proc.stdout).strip()


def settled(job_id: str, wait: float = SETTLE_SECONDS) -> Job:
    """The job's state once it is no longer COMPLETING (up to ``wait`` seconds), or RUNNING
    for a few seconds more: when Slurm ends a job it marks it (COMPLETING, with the reason)
    before it kills the steps, so a job still RUNNING a moment after its step ended lives on
    and the step ended on its own."""
    started = time.monotonic()
    job = show_job(job_id)
    while time.monotonic() - started < (wait if job.state == "COMPLETING" else RUNNING_GRACE):
        if job.state not in ("RUNNING", "COMPLETING"):
            break
        time.sleep(0.5)
        job = show_job(job_id)
    return job


def drop_caches(job_id: str, nodes: list[str]) -> dict[str, str]:
    """Flush and drop the page cache on each allocated node, one step per node (``sync``,
    then ``sysctl -w vm.drop_caches=3``): {hostname: "dropped" | "not permitted: <why>"}."""
    outcome: dict[str, str] = {}
    for node in nodes:
        why = ""
        for argv in (["sync"], ["sysctl", "-w", "vm.drop_caches=3"]):
            try:
                proc = _run(step_argv(job_id, argv, nodelist=node))
            except SlurmError as exc:
                why = str(exc)
                break
            if proc.returncode != 0:
                lines = (proc.stderr or proc.stdout).strip().splitlines()
                why = lines[-1] if lines else f"{argv[0]} exited with {proc.returncode}"
                break
        outcome[node] = f"not permitted: {why}" if why else "dropped"
    return outcome


def hosts_of(names: list[str]) -> tuple[Host, ...]:
    """The allocated nodes as the run's hosts (Slurm names them; the name is the address)."""
    return tuple(Host(name=name, address=name) for name in names)


class Allocation:
    """One salloc holding a job's nodes for as long as its stdin pipe is open.

    ``start`` launches it; ``job_id`` is known once salloc prints it (pending or granted),
    ``granted`` once the nodes are there; ``release`` closes the pipe and waits for salloc.
    """

    def __init__(self, argv: list[str], env: dict[str, str] | None = None):
        self.argv = argv
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.job_id: str | None = None
        self.granted = threading.Event()
        self.lines: list[str] = []
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=self.env,
                start_new_session=True,  # no terminal signals from the worker's group
            )
        except OSError as exc:
            raise SlurmError(f"could not start {self.argv[0]}: {exc}") from None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            found = job_id_in(line)
            if found and self.job_id is None:
                self.job_id = found
            if "Granted job allocation" in line:
                self.granted.set()

    @property
    def ended(self) -> bool:
        return self.proc is None or self.proc.poll() is not None

    def output(self) -> str:
        return "\n".join(self.lines[-20:])

    def release(self, timeout: float = COMMAND_TIMEOUT) -> None:
        """Close the pipe (``cat`` ends, salloc relinquishes the allocation) and wait; scancel
        and kill salloc when it does not end in time."""
        if self.proc is None:
            return
        try:
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            if self.job_id:
                cancel(self.job_id)
            self.proc.kill()
            self.proc.wait(timeout=timeout)
        if self._reader is not None:
            self._reader.join(timeout=5)


def inner_mode(tool_modes: tuple[str, ...]) -> str | None:
    """The mode a tool runs in inside an allocation: MPI tools as an MPI job step over the
    allocated nodes, single-process tools as one task; None when it can do neither."""
    if "mpi" in tool_modes:
        return "mpi"
    if "single" in tool_modes:
        return "single"
    return None


def as_steps(command, job_id: str, mode: str):
    """``command`` (built for ``mode`` inside job ``job_id``) with its preparation steps and
    its measured argv run as steps of the job. MPI commands already are (``mpi_launch``)."""
    if mode == "mpi":
        return command
    return replace(
        command,
        argv=step_argv(job_id, command.argv),
        prepare=[step_argv(job_id, argv) for argv in command.prepare],
    )
