"""The launch spec: what a worker needs to run one run besides its parameters, written by the
matrix expansion (``experiments.matrices.launching.launch_spec``) and read by the executor.

It is stored as ``Run.launch`` (JSON) beside what the run's life adds there: ``history``
(earlier attempts), ``redispatched`` (messages sent again) and the parse options of the one
results path (``parse_options``, ``params``: ``experiments.results.store``). ``LaunchSpec.read``
takes only its own keys and says clearly what is wrong with a stored spec.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from runners.tools.base import Host, LaunchContext, ParamError

MODES = ("single", "mpi", "multihost", "slurm")  # experiments.models.matrices.LaunchMode

# Parameters of a run that are its launch's, not its tool's (a matrix's fixed parameters or
# axes; stored in ``Run.params`` so comparisons can use them, never passed to the adapter):
TARGET = "target"  # the inventory target the run works on
NODES = "nodes"  # MPI / multi-host: the first N of the testbed's client nodes (default all)
TASKS_PER_NODE = "tasks_per_node"  # MPI (and Slurm with an MPI tool): ranks per node
SLURM_NODES = "slurm_nodes"  # Slurm mode: the nodes the job allocates (default 1)
TUNING_PREFIX = "tuning:"  # tuning:<scope>.<key>: a tuning setting swept as an axis
LAUNCH_PARAMS = frozenset({TARGET, NODES, TASKS_PER_NODE, SLURM_NODES})


def tool_params(params: dict[str, Any]) -> dict[str, Any]:
    """A run's (or a cell's) parameters without the launch's: what its tool adapter takes."""
    return {
        k: v
        for k, v in params.items()
        if k not in LAUNCH_PARAMS and not k.startswith(TUNING_PREFIX)
    }


class LaunchError(ValueError):
    """A stored launch spec that a worker cannot use (written by another version, edited)."""


@dataclass(frozen=True)
class LaunchSpec:
    workdir: str  # the testbed's (or target's) benchmark directory on the launcher
    launcher: str  # hostname of the node whose worker runs it (its queue: queue_for())
    mode: str = "single"  # MODES: one process, an MPI job, one process per host, Slurm
    hosts: tuple[Host, ...] = ()  # client nodes of an MPI or multi-host run (Slurm: allocated)
    tasks_per_node: int = 1
    # Slurm mode (runners.slurm): the testbed's partition and account, the nodes to allocate.
    partition: str = ""
    account: str = ""
    nodes: int = 1
    timeout_s: int | None = None
    drop_caches: bool = False
    apply_tuning: bool = False
    tuning: dict[str, Any] = field(default_factory=dict)  # "scope.key" -> value, this cell's
    # BeeGFS target ids of the run's target (StorageBench on one target benchmarks them).
    target_ids: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["hosts"] = [[h.name, h.address] for h in self.hosts]
        data["target_ids"] = list(self.target_ids)
        if not self.target_ids:
            del data["target_ids"]  # the usual case: no key, as before there was one
        return data

    @classmethod
    def read(cls, launch: dict[str, Any] | None) -> LaunchSpec:
        """The spec of a stored ``Run.launch`` (other keys ignored); LaunchError names what
        is missing or malformed."""
        if not isinstance(launch, dict):
            raise LaunchError("the run has no launch spec (was it expanded from a matrix?)")
        try:
            workdir = launch["workdir"]
            if not isinstance(workdir, str) or not workdir:
                raise LaunchError(f"workdir {workdir!r} is not a directory path")
            mode = launch.get("mode") or "single"
            if mode not in MODES:
                raise LaunchError(f"mode {mode!r} is not one of {', '.join(MODES)}")
            if mode == "slurm" and not launch.get("partition"):
                raise LaunchError("a Slurm-mode run names no partition")
            hosts = tuple(Host(name=str(n), address=str(a)) for n, a in launch.get("hosts") or [])
            timeout = launch.get("timeout_s")
            tuning = launch.get("tuning") or {}
            target_ids = tuple(int(t) for t in launch.get("target_ids") or ())
            if not isinstance(tuning, dict):
                raise LaunchError("tuning is not a mapping of scope.key to value")
            return cls(
                workdir=workdir,
                launcher=str(launch.get("launcher") or ""),
                mode=mode,
                hosts=hosts,
                tasks_per_node=int(launch.get("tasks_per_node") or 1),
                partition=str(launch.get("partition") or ""),
                account=str(launch.get("account") or ""),
                nodes=int(launch.get("nodes") or 1),
                timeout_s=None if timeout in (None, "") else int(timeout),
                drop_caches=bool(launch.get("drop_caches")),
                apply_tuning=bool(launch.get("apply_tuning")),
                tuning=dict(tuning),
                target_ids=target_ids,
            )
        except LaunchError:
            raise
        except ParamError as exc:
            raise LaunchError(f"launch spec: {exc}") from exc
        except (KeyError, TypeError, ValueError) as exc:
            raise LaunchError(f"malformed launch spec: {exc!r}") from exc

    def context(self, scratch: Path, slurm_job: str = "") -> LaunchContext:
        """What the tool adapters build their argv from. A Slurm-mode spec is first turned
        into the mode its tool runs in inside the allocation (``runners.slurm.inner``)."""
        return LaunchContext(
            workdir=Path(self.workdir),
            scratch=scratch,
            mode=self.mode,
            hosts=self.hosts,
            tasks_per_node=self.tasks_per_node,
            slurm_job=slurm_job,
            target_ids=self.target_ids,
        )


def queue_for(hostname: str) -> str:
    """The Celery queue of a node's worker."""
    return f"node.{hostname}"
