"""The chaos soak (issue 28): short real runs (dd, fio) from two users on three nodes of the
network-namespace lab, while an injector carries out a seeded fault plan
(tests/soak/faults.py), then the checks of what must hold whatever the faults were.

The installation is the soak's own: a throw-away PostgreSQL cluster and redis-server
(tests/soak/servers.py, which it restarts), a ``Stack`` on them, one Celery worker per node in
the node's namespace (reaching both servers through the lab's gateway, so cutting a node's link
cuts it off from both), a worker of the default queue and Celery beat in this namespace (the
janitor). Each node's testbed benchmarks in a small loop-mounted ext4 of its own (what the
"fill" fault fills). With clock faults planned, each node worker runs under libfaketime, its
offset read from a file of its own at every call (FAKETIME_NO_CACHE), monotonic clocks left
alone: this machine's clock is never touched.

Evidence the checks read, beside the database: every dd and fio the workers start is a small
wrapper script first in their PATH that appends ``start <uptime> <pid> <cwd> <argv>`` and
``end <uptime> <pid> <exit code>`` to the node's tool log (uptime: /proc/uptime, one clock for
every node and never faked; the tool itself runs without libfaketime), so the soak knows
each attempt's tool starts (the run's own
directory names the run and its attempt) and the spans of the tools on each node."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tests.labs import ROOT, Stack, runs, wait_for, wait_for_workers, worker_argv
from tests.labs.netns import NetnsLab
from tests.labs.servers import Postgres, Redis
from tests.soak import faults as plans

FINAL = ("succeeded", "failed", "cancelled")
FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
REALSLEEP = Path(__file__).with_name("realsleep.c")
NODES = ("node1", "node2", "node3")
# Which node launches each testbed (its tool runs there): alice's tb-a1 from node1 with node3
# as its server, bob's tb-b2 on node2 alone and tb-b3 on node3 alone (alice shares node3), so
# runs of both users hold node3.
TESTBEDS = {"tb-a1": ("alice", "node1"), "tb-b2": ("bob", "node2"), "tb-b3": ("bob", "node3")}
TOOLS = {
    "dd": "{bs: 64k, count: 64}",
    "fio": "{rw: write, size: 2m, bs: 256k, runtime: 1, time_based: true}",
}
MATRIX = """\
name: soak {index} {tool} on {testbed}
tool: {tool}
testbeds: [{testbed}]
repetitions: {reps}
drop_caches: false
timeout_s: 120
params: {params}
"""
WRAPPER = """#!/bin/sh
# The chaos soak's evidence of each tool start and end (tests/soak/harness.py).
up() {{ cut -d' ' -f1 /proc/uptime; }}
echo "start $(up) $$ $PWD $*" >> "$SOAK_TOOL_LOG"
# The tool runs on the node's true clock: fio under libfaketime never ends a time-based job,
# even with the clock not stepped. (What is tested is what beeweb does with a stepped clock.)
env -u LD_PRELOAD {real} "$@"
rc=$?
echo "end $(up) $$ $rc" >> "$SOAK_TOOL_LOG"
exit $rc
"""
# Runs launched and not yet ended that the soak keeps (3 testbeds x 2 repetitions x 2).
OPEN = 12
RUN_DIR = re.compile(r"beeweb-run-([0-9a-f-]{36})-(\d+)")


@dataclass
class Config:
    runs: int = 40
    faults: int = 7
    seed: int = 1
    kinds: tuple[str, ...] = plans.KINDS
    per_kind: int = 0
    stale: int = 5  # BEEWEB_RUN_STALE_SECONDS
    janitor: int = 2  # BEEWEB_JANITOR_SECONDS
    redispatch: int = 6  # BEEWEB_RUN_REDISPATCH_SECONDS
    max_attempts: int = 3
    fs_mb: int = 24  # each node's benchmark file system
    hang_guard: float = 0.0  # only against something never happening (0: from the sizes)

    @property
    def guard(self) -> float:
        return self.hang_guard or 600.0 + 90.0 * self.faults + 5.0 * self.runs

    @classmethod
    def from_env(cls, **defaults) -> Config:
        """SOAK_RUNS, SOAK_FAULTS (a count), SOAK_KINDS (comma-separated, or "all"; a kind
        with a leading "-" is left out), SOAK_SEED, SOAK_PER_KIND over ``defaults``."""
        config = cls(**defaults)
        env = os.environ
        if env.get("SOAK_RUNS"):
            config.runs = int(env["SOAK_RUNS"])
        if env.get("SOAK_FAULTS"):
            config.faults = int(env["SOAK_FAULTS"])
        if env.get("SOAK_SEED"):
            config.seed = int(env["SOAK_SEED"])
        if env.get("SOAK_PER_KIND"):
            config.per_kind = int(env["SOAK_PER_KIND"])
        if env.get("SOAK_KINDS"):
            config.kinds = parse_kinds(env["SOAK_KINDS"], config.kinds)
        return config


def clock_unavailable() -> str:
    """Why clock steps cannot be simulated here ('' when they can)."""
    if not FAKETIME_LIB.exists():
        return f"libfaketime is not installed ({FAKETIME_LIB}: apt-get install faketime)"
    if shutil.which("gcc") is None:
        return "gcc is missing (it builds tests/soak/realsleep.c)"
    return ""


def parse_kinds(text: str, default: tuple[str, ...] = plans.KINDS) -> tuple[str, ...]:
    """ "all", "postgres,redis", or "-clock,-postgres" (every kind of ``default`` but those)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if parts == ["all"]:
        return plans.KINDS
    drop = {p[1:] for p in parts if p.startswith("-")}
    keep = [p for p in parts if not p.startswith("-")]
    unknown = (drop | set(keep)) - set(plans.KINDS)
    if unknown:
        raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(plans.KINDS)}")
    base = keep or list(default)
    return tuple(k for k in plans.KINDS if k in base and k not in drop)


def _check(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {proc.stderr.strip()}")
    return proc.stdout


@dataclass
class LoopFs:
    """A small ext4 on a loop device, mounted at ``mount``."""

    mount: Path
    loop: str = ""
    filler: Path | None = None

    @classmethod
    def make(cls, where: Path, name: str, mb: int) -> LoopFs:
        image, mount = where / f"{name}.img", where / name
        mount.mkdir()
        with open(image, "wb") as fh:
            fh.truncate(mb * 1024 * 1024)
        fs = cls(mount)
        fs.loop = _check(["losetup", "--find", "--show", str(image)]).strip()
        _check(["mkfs.ext4", "-q", "-F", "-m", "0", fs.loop])
        _check(["mount", "-t", "ext4", fs.loop, str(mount)])
        return fs

    def fill(self) -> None:
        """A file that takes every free block."""
        self.filler = self.mount / "soak-filler"
        with open(self.filler, "wb", buffering=0) as fh:
            for chunk in (1 << 20, 1 << 16, 1 << 12, 1 << 10, 1):
                try:
                    while True:
                        fh.write(b"\0" * chunk)
                except OSError:
                    pass
            with contextlib.suppress(OSError):
                os.fsync(fh.fileno())

    def free(self) -> None:
        if self.filler is not None:
            with contextlib.suppress(FileNotFoundError):
                self.filler.unlink()
            self.filler = None

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.mount)], capture_output=True)
        if self.loop:
            subprocess.run(["losetup", "-d", self.loop], capture_output=True)


@dataclass
class Outcome:
    """What a soak did and found."""

    config: Config
    faults: list[plans.Fault]
    states: Counter = field(default_factory=Counter)
    runs: int = 0
    attempts: int = 0
    wall: float = 0.0
    failures: list[str] = field(default_factory=list)  # invariants that did not hold
    errors: Counter = field(default_factory=Counter)  # failed runs' errors, shortened

    def figures(self) -> str:
        by_kind = Counter(f.kind for f in self.faults if f.started is not None)
        recovery: dict[str, list[float]] = defaultdict(list)
        unmeasured: Counter = Counter()
        for f in self.faults:
            if f.recovery is not None:
                recovery[f.kind].append(f.recovery)
            elif f.started is not None:
                unmeasured[f.kind] += 1
        lines = [
            f"chaos soak: seed {self.config.seed}, {self.runs} runs ({self.attempts} attempts), "
            f"{sum(by_kind.values())} faults, {self.wall:.0f} s wall time",
            "outcomes: " + ", ".join(f"{s} {self.states[s]}" for s in FINAL if self.states[s]),
            "faults by kind: " + ", ".join(f"{k} {by_kind[k]}" for k in plans.KINDS if by_kind[k]),
            f"pairs within a minute: {sum(1 for f in self.faults if f.with_previous)}",
            "time to recover (from the fault to the first run in its scope that succeeded after "
            "its repair; s):",
        ]
        for kind in plans.KINDS:
            values = sorted(recovery.get(kind, []))
            if not values and not unmeasured[kind]:
                continue
            text = (
                f"min {values[0]:.1f} median {values[len(values) // 2]:.1f} max {values[-1]:.1f}"
                if values
                else "-"
            )
            extra = (
                f" ({unmeasured[kind]} with no work left to show it)" if unmeasured[kind] else ""
            )
            lines.append(f"  {kind:9s} n={len(values)} {text}{extra}")
        if self.errors:
            lines.append("failed runs' errors:")
            lines += [f"  {n} x {e}" for e, n in self.errors.most_common(12)]
        lines.append(
            "invariants: all held"
            if not self.failures
            else "invariants that did NOT hold:\n  " + "\n  ".join(self.failures)
        )
        return "\n".join(lines)


class Soak:
    def __init__(self, tmp: Path, config: Config):
        self.tmp = Path(tmp)
        self.config = config
        self.plan = plans.plan(
            config.seed,
            config.runs,
            config.faults,
            config.kinds,
            NODES,
            config.stale,
            config.per_kind,
        )
        self.pg: Postgres | None = None
        self.redis: Redis | None = None
        self.lab: NetnsLab | None = None
        self.stack: Stack | None = None
        self.fs: dict[str, LoopFs] = {}
        self.workers: dict[str, subprocess.Popen] = {}
        self.beat: subprocess.Popen | None = None
        self.default: subprocess.Popen | None = None
        self.began = time.monotonic()
        self.log_lines: list[str] = []
        self.clock = "clock" in config.kinds
        self.batches = 0
        self.launched = 0  # runs launched (the launcher's count)
        self.ended = 0  # runs ended (the main loop's last reading)
        self.busy = True  # faults remain, are in force or have not recovered yet
        self.stopping = False
        self.died: list[str] = []  # processes that exited by themselves
        self.down: set[str] = set()  # processes a fault killed, not started again yet
        self.unlaunched: list[int] = []  # matrices made whose launch was refused so far
        self.refusals: Counter = Counter()

    # --- set-up ---------------------------------------------------------------------------

    def say(self, text: str) -> None:
        line = f"[soak {time.monotonic() - self.began:7.1f}s] {text}"
        self.log_lines.append(line)
        print(line, flush=True)

    def start(self) -> None:
        self.pg = Postgres().start()
        self.redis = Redis(self.tmp).start()
        self.lab = NetnsLab(n=len(NODES)).start()
        self.lab.forward((self.pg.port, self.redis.port))
        self.stack = Stack(self.tmp, database_url=self.pg.url, broker_url=self.redis.url)
        for node in NODES:
            self.fs[node] = LoopFs.make(self.tmp, f"fs-{node}", self.config.fs_mb)
        if self.clock:
            _check(["gcc", "-shared", "-fPIC", "-O2", "-o", str(self.tmp / "realsleep.so"),
                    str(REALSLEEP)])  # fmt: skip
        bin_dir = self.tmp / "bin"
        bin_dir.mkdir()
        for tool in TOOLS:
            real = subprocess.run(
                ["sh", "-c", f"command -v {tool}"], capture_output=True, text=True
            ).stdout.strip()
            wrapper = bin_dir / tool
            wrapper.write_text(WRAPPER.format(real=real))
            wrapper.chmod(0o755)
        addresses = {n.hostname: n.address for n in self.lab.nodes}
        self.stack.call(
            "inventory",
            {
                "users": {"alice": "x", "bob": "x"},
                "nodes": {
                    "node1": {"owner": "alice", "address": addresses["node1"]},
                    "node2": {"owner": "bob", "address": addresses["node2"]},
                    "node3": {"owner": "alice", "address": addresses["node3"], "shared": True},
                },
                "testbeds": [
                    {
                        "name": "tb-a1",
                        "owner": "alice",
                        "benchmark_dir": str(self.fs["node1"].mount),
                        "members": {"node1": ["client"], "node3": ["storage", "metadata"]},
                    },
                    {
                        "name": "tb-b2",
                        "owner": "bob",
                        "benchmark_dir": str(self.fs["node2"].mount),
                        "members": {"node2": ["client", "storage", "metadata"]},
                    },
                    {
                        "name": "tb-b3",
                        "owner": "bob",
                        "benchmark_dir": str(self.fs["node3"].mount),
                        "members": {"node3": ["client", "storage", "metadata"]},
                    },
                ],
            },
        )
        for node in NODES:
            self.clock_file(node).write_text("+0\n")
            self.start_worker(node)
        self.start_default()
        self.start_beat()
        wait_for_workers(self.stack, *(f"{n}@{n}" for n in NODES), agents=True, timeout=180)
        self.say(
            f"up: PostgreSQL :{self.pg.port}, Redis :{self.redis.port}, lab {self.lab.bridge}, "
            f"seed {self.config.seed}, {self.config.runs} runs, {len(self.plan)} faults planned "
            f"({', '.join(self.config.kinds) or 'none'})"
        )

    def env(self) -> dict[str, str]:
        assert self.stack is not None
        return {
            **self.stack.env,
            "BEEWEB_RUN_STALE_SECONDS": str(self.config.stale),
            "BEEWEB_JANITOR_SECONDS": str(self.config.janitor),
            "BEEWEB_RUN_REDISPATCH_SECONDS": str(self.config.redispatch),
            "BEEWEB_RUN_MAX_ATTEMPTS": str(self.config.max_attempts),
            "BEEWEB_NODE_DIRS": ":".join(str(fs.mount) for fs in self.fs.values()),
        }

    def clock_file(self, node: str) -> Path:
        return self.tmp / f"faketime-{node}"

    def tool_log(self, node: str) -> Path:
        return self.tmp / f"tools-{node}.log"

    def start_worker(self, node: str) -> None:
        assert self.lab is not None and self.stack is not None
        env = self.env()
        for key in ("DATABASE_URL", "CELERY_BROKER_URL"):
            env[key] = self.lab.via_gateway(env[key])
        env["PATH"] = f"{self.tmp / 'bin'}:{env.get('PATH', '')}"
        env["SOAK_TOOL_LOG"] = str(self.tool_log(node))
        if self.clock:
            env.update(
                LD_PRELOAD=f"{self.tmp / 'realsleep.so'}:{FAKETIME_LIB}",
                FAKETIME_TIMESTAMP_FILE=str(self.clock_file(node)),
                FAKETIME_NO_CACHE="1",
                FAKETIME_DONT_FAKE_MONOTONIC="1",
            )
        name = f"{node}@{node}"
        proc = self.lab.popen(
            node,
            worker_argv(f"node.{node}", name),
            env=env,
            hostname=node,
            cwd=ROOT,
            stdout=open(self.stack._log(name), "ab"),
            stderr=subprocess.STDOUT,
        )
        self.stack.procs.append(proc)
        self.workers[node] = proc

    def start_default(self) -> None:
        assert self.stack is not None
        self.default = self.stack.worker("default", "default@soak", env=self.env())

    def start_beat(self) -> None:
        assert self.stack is not None
        log = open(self.tmp / "beat.log", "ab")
        self.beat = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "beeweb",
                "beat",
                "--loglevel=INFO",
                "-s",
                str(self.tmp / "beat-schedule"),
            ],  # fmt: skip
            cwd=ROOT,
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.stack.procs.append(self.beat)

    def close(self) -> None:
        if self.stack is not None:
            with contextlib.suppress(Exception):
                self.stack.close()
        if self.lab is not None:
            for i in range(1, len(NODES) + 1):
                subprocess.run(
                    ["ip", "link", "set", "dev", f"bw{self.lab.pid}-v{i}", "up"],
                    capture_output=True,
                )
            self.lab.stop()
        for fs in self.fs.values():
            fs.close()
        for server in (self.pg, self.redis):
            if server is not None:
                server.close()

    # --- the workload -----------------------------------------------------------------------

    def launcher(self) -> None:
        """The launching thread: keeps ``OPEN`` runs launched and not yet ended while faults
        remain (and until ``config.runs`` were launched), launches again what was refused."""
        while not self.stopping:
            if self.unlaunched:
                self.launched += self.launch_again()
            elif (
                self.busy or self.launched < self.config.runs
            ) and self.launched - self.ended < OPEN:
                self.launched += self.launch_batch()
                continue
            time.sleep(0.5)

    def launch_batch(self) -> int:
        """Make one matrix of 2 repetitions on each testbed (both users, every node), the
        tool alternating from batch to batch, and launch them with every matrix a launch
        refused before (the database or the broker was down: its runs stay planned, and a
        user presses Launch again); the runs launched now."""
        assert self.stack is not None
        tool = list(TOOLS)[self.batches % len(TOOLS)]
        specs = [
            [
                owner,
                MATRIX.format(
                    index=self.batches, tool=tool, testbed=testbed, reps=2, params=TOOLS[tool]
                ),
            ]
            for testbed, (owner, _) in TESTBEDS.items()
        ]
        try:
            self.unlaunched += self.stack.call("make", specs)
            self.batches += 1
        except (AssertionError, subprocess.SubprocessError) as exc:
            self.say(f"could not make matrices (tried again): {_last(exc)}")
        return self.launch_again()

    def launch_again(self) -> int:
        """Launch the matrices not launched yet; the runs launched."""
        assert self.stack is not None
        if not self.unlaunched:
            return 0
        try:
            answers = self.stack.call("launch_again", self.unlaunched)
        except (AssertionError, subprocess.SubprocessError) as exc:
            self.say(f"launch failed (tried again): {_last(exc)}")
            return 0
        refused = [pk for pk, error in answers if error]
        for _, error in answers:
            if error:
                self.refusals[_short(error)] += 1
        if refused:
            first = next(error for _, error in answers if error)
            self.say(f"launch of {len(refused)} matrices refused (tried again): {first}")
        done = len(self.unlaunched) - len(refused)
        self.unlaunched = refused
        return 2 * done

    def progress(self) -> dict[str, tuple[int, int]] | None:
        """Per worker (and "*" for all): (runs ended, runs succeeded); None when the
        database cannot be read (it is down, say)."""
        assert self.stack is not None
        try:
            rows = self.stack.sql(
                "SELECT worker, count(*) FILTER (WHERE status IN "
                "('succeeded', 'failed', 'cancelled')), "
                "count(*) FILTER (WHERE status = 'succeeded') FROM experiments_run GROUP BY worker"
            )
        except Exception:
            return None
        out = {"*": (0, 0)}
        for worker, ended, attempts in rows:
            out[worker or ""] = (ended, int(attempts))
            out["*"] = (out["*"][0] + ended, out["*"][1] + int(attempts))
        return out

    # --- faults -----------------------------------------------------------------------------

    def inject(self, fault: plans.Fault) -> None:
        assert self.pg and self.redis and self.lab
        kind, node = fault.kind, fault.node
        if kind == "postgres":
            self.pg.stop(fault.detail["mode"])
        elif kind == "redis":
            self.redis.stop(kill=True)
        elif kind == "worker":
            self.down.add(f"{node}@{node}")
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.workers[node].pid, signal.SIGKILL)
            self.workers[node].wait(timeout=30)
        elif kind == "beat":
            assert self.beat is not None
            self.down.add("beat")
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.beat.pid, signal.SIGKILL)
            self.beat.wait(timeout=30)
        elif kind == "link":
            self.link(node, "down")
        elif kind == "fill":
            self.fs[node].fill()
        elif kind == "clock":
            step = fault.detail["step_s"]
            self.clock_file(node).write_text(f"{step:+d}\n")
            if not self.clock:
                fault.note = "workers run without libfaketime: nothing stepped"

    def repair(self, fault: plans.Fault) -> None:
        assert self.pg and self.redis
        kind, node = fault.kind, fault.node
        if kind == "postgres":
            self.pg._ctl_start()
        elif kind == "redis":
            self.redis.start()
        elif kind == "worker":
            self.start_worker(node)
            self.down.discard(f"{node}@{node}")
        elif kind == "beat":
            self.start_beat()
            self.down.discard("beat")
        elif kind == "link":
            self.link(node, "up")
        elif kind == "fill":
            self.fs[node].free()
        elif kind == "clock":
            self.clock_file(node).write_text("+0\n")

    def link(self, node: str, state: str) -> None:
        assert self.lab is not None
        index = NODES.index(node) + 1
        _check(["ip", "link", "set", "dev", f"bw{self.lab.pid}-v{index}", state])

    def scope(self, fault: plans.Fault) -> str:
        return f"{fault.node}@{fault.node}" if fault.node else "*"

    def run(self) -> Outcome:
        """Launch runs as they go (keeping ``OPEN`` of them not yet ended) and carry out the
        plan: a fault fires once its count of runs has ended and the one before it is
        repaired (or with it, when planned so). Runs are launched until at least
        ``config.runs`` were and every fault has recovered; then every run is waited for,
        and checked. The outcome (its ``failures`` empty when every invariant held)."""
        start = time.monotonic()
        pending = list(self.plan)
        active: list[tuple[plans.Fault, float]] = []  # (fault, repair at)
        recovering: list[tuple[plans.Fault, dict]] = []  # (fault, baseline)
        last: dict = {"*": (0, 0)}
        self.busy = True
        launcher = threading.Thread(target=self.launcher, name="soak-launcher", daemon=True)
        launcher.start()
        deadline = start + self.config.guard
        while time.monotonic() < deadline:
            seen = self.progress()
            if seen is not None:
                last = seen
            ended = self.ended = last["*"][0]
            for fault, due in list(active):
                if time.monotonic() >= due:
                    self.repair(fault)
                    fault.repaired = time.monotonic() - self.began
                    active.remove((fault, due))
                    recovering.append((fault, {}))
                    self.say(f"repaired {fault.describe()}")
            # Recovery: the first run that succeeds in the fault's scope after its repair
            # (the baseline read once the database answers again).
            if seen is not None:
                for item in list(recovering):
                    fault, base = item
                    succeeded = seen.get(self.scope(fault), (0, 0))[1]
                    if "v" not in base:
                        base["v"] = succeeded
                    elif succeeded > base["v"]:
                        fault.recovered = time.monotonic() - self.began
                        recovering.remove(item)
                        self.say(f"recovered #{fault.index} {fault.kind} in {fault.recovery:.1f} s")
            while (
                pending and ended >= pending[0].after and (not active or pending[0].with_previous)
            ):
                fault = pending.pop(0)
                fault.started = time.monotonic() - self.began
                self.say(f"fault {fault.describe()} after {ended} runs ended")
                try:
                    self.inject(fault)
                except Exception as exc:  # recorded; the soak goes on
                    fault.note = f"injection failed: {exc}"
                    self.say(fault.note)
                active.append((fault, time.monotonic() + fault.hold))
            self.busy = bool(pending or active or recovering)
            launched = self.launched
            if self.crashed():
                break
            if (
                not self.busy
                and not self.unlaunched
                and launched >= self.config.runs
                and seen is not None
                and ended >= launched
                and self.all_final()
            ):
                break
            time.sleep(0.5)
        self.stopping = True
        launcher.join(timeout=600)
        launched = self.launched
        # A batch the launcher sent as the loop ended: its runs end too.
        if not self.died:
            wait_for(self.all_final, max(0.0, deadline - time.monotonic()) + 60, interval=1)
        for fault, _ in active:  # the hang guard: put things back before checking
            self.repair(fault)
        for fault, _ in recovering:
            fault.note = fault.note or "did not recover before the hang guard"
        self.say("every run ended" if self.all_final() else "HANG GUARD: runs still open")
        outcome = self.check(launched)
        for line in self.died:
            log = self.tmp / (f"worker-{line.split()[0].replace('@', '-')}.log")
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            outcome.failures.insert(0, f"{line}; its log ends:\n{tail}")
        outcome.wall = time.monotonic() - start
        return outcome

    def crashed(self) -> list[str]:
        """Processes of the installation that exited by themselves (not killed by a fault):
        a worker or beat that dies of a fault is a finding; the soak stops at once."""
        found = []
        named = {f"{n}@{n}": p for n, p in self.workers.items()}
        named["beat"] = self.beat
        named["default@soak"] = self.default
        for name, proc in named.items():
            if proc is not None and name not in self.down and proc.poll() is not None:
                found.append(f"{name} exited by itself with {proc.returncode}")
        if found and not self.died:
            self.died = found
            for line in found:
                self.say(line)
        return found

    def total_runs(self) -> int | None:
        assert self.stack is not None
        try:
            return self.stack.sql("SELECT count(*) FROM experiments_run")[0][0]
        except Exception:
            return None

    def all_final(self) -> bool:
        assert self.stack is not None
        try:
            return not self.stack.sql(
                "SELECT 1 FROM experiments_run WHERE status NOT IN "
                "('succeeded', 'failed', 'cancelled') LIMIT 1"
            )
        except Exception:
            return False

    # --- the checks -------------------------------------------------------------------------

    def tool_starts(self) -> tuple[dict, list[str]]:
        """Per node: each tool the node's workers started, as dicts of run uuid, attempt,
        start, end (uptime seconds; None when killed before it ended) and exit code."""
        by_node: dict[str, list[dict]] = {}
        problems: list[str] = []
        for node in NODES:
            path = self.tool_log(node)
            starts: dict[str, dict] = {}
            order: list[dict] = []
            for line in path.read_text().splitlines() if path.exists() else []:
                parts = line.split(" ", 4)
                if parts[0] == "start" and len(parts) >= 4:
                    match = RUN_DIR.search(line)
                    entry = {
                        "uuid": match.group(1) if match else None,
                        "attempt": int(match.group(2)) if match else None,
                        "start": float(parts[1]),
                        "end": None,
                        "rc": None,
                        "pid": parts[2],
                    }
                    starts[parts[2]] = entry
                    order.append(entry)
                elif parts[0] == "end" and len(parts) >= 4 and parts[2] in starts:
                    starts[parts[2]]["end"] = float(parts[1])
                    starts[parts[2]]["rc"] = int(parts[3])
            by_node[node] = order
        return by_node, problems

    def check(self, launched: int) -> Outcome:
        assert self.stack is not None
        out = Outcome(self.config, self.plan)
        fail = out.failures.append
        rows = runs(self.stack)
        out.runs = len(rows)
        out.attempts = sum(r["attempts"] for r in rows)
        out.states = Counter(r["status"] for r in rows)
        for r in rows:
            if r["status"] == "failed":
                out.errors[_short(r["error"])] += 1
        # Nothing lost, nothing stuck, every run final, a failure says why.
        matrices = self.stack.sql("SELECT count(*) FROM experiments_matrix")[0][0]
        if len(rows) < launched or len(rows) != 2 * matrices:
            fail(f"lost runs: {launched} launched, {matrices} matrices of 2, {len(rows)} stored")
        for r in rows:
            if r["status"] not in FINAL:
                fail(f"run {r['pk']} stuck {r['status']} (attempt {r['attempts']}, "
                     f"worker {r['worker']}, waiting for {r['waiting_for']!r})")  # fmt: skip
            elif r["status"] == "failed" and not r["error"].strip():
                fail(f"run {r['pk']} failed without a reason")
        # A run's tool started at most once per attempt, and never for an attempt the run
        # did not make.
        by_node, _ = self.tool_starts()
        attempts = {r["uuid"]: r for r in rows}
        counted = Counter(
            (e["uuid"], e["attempt"]) for node in NODES for e in by_node[node] if e["uuid"]
        )
        for (uuid, attempt), n in counted.items():
            run = attempts.get(uuid)
            if n > 1:
                fail(f"run {run and run['pk']} attempt {attempt}: its tool started {n} times")
            if run is None or attempt > run["attempts"]:
                fail(f"a tool started for run {uuid} attempt {attempt}, which it never made")
        # Results stored once: no metric row twice.
        doubles = self.stack.sql(
            "SELECT run_id, name, stat, iteration, count(*) FROM experiments_metric "
            "GROUP BY run_id, name, stat, iteration, extra::text HAVING count(*) > 1"
        )
        for run_id, name, stat, iteration, n in doubles[:10]:
            fail(f"run {run_id}: metric {name}/{stat}/{iteration} stored {n} times")
        no_metrics = [r["pk"] for r in rows if r["status"] == "succeeded" and not r["metrics"]]
        if no_metrics:
            fail(f"succeeded runs without metrics: {no_metrics[:10]}")
        # No two runs overlapped on a node: the tool spans of each run's last attempt (the
        # one that ended it), by the nodes the run held. An earlier attempt's tool may
        # outlive its attempt (a node cut off runs on until it hears it was taken): that is
        # the fault, not an overlap of runs.
        spans: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
        for node in NODES:
            for e in by_node[node]:
                run = attempts.get(e["uuid"] or "")
                if (
                    run is None
                    or run["status"] != "succeeded"
                    or e["attempt"] != run["attempts"]
                    or e["end"] is None
                ):
                    continue
                for held in run["nodes_held"] or [node]:
                    spans[held].append((e["start"], e["end"], run["pk"]))
        for node, items in spans.items():
            items.sort()
            for (_, end, a), (begin, _, b) in zip(items, items[1:], strict=False):
                if begin < end:
                    fail(f"runs {a} and {b} overlapped on {node} ({end - begin:.2f} s)")
        # No lease left held.
        if not wait_for(
            lambda: self.stack.sql("SELECT count(*) FROM experiments_nodelease")[0][0] == 0, 60
        ):
            leases = self.stack.sql("SELECT hostname, run_id FROM experiments_nodelease")
            fail(f"leases left held: {leases}")
        # Summaries equal a rebuild from the runs.
        diff = self.stack.call("summary_differences")
        if diff:
            fail("summaries differ from a rebuild: " + "; ".join(diff[:5]))
        # The raw output of every run whose last attempt's tool ended (it produced output) is
        # stored; and of every run that succeeded.
        for node in NODES:
            for e in by_node[node]:
                run = attempts.get(e["uuid"] or "")
                if (
                    run is not None
                    and e["attempt"] == run["attempts"]
                    and e["end"] is not None
                    and run["status"] in FINAL
                    and not (run["raw_output"] or "").strip()
                ):
                    fail(f"run {run['pk']} ({run['status']}): its tool ended, no raw output")
        for r in rows:
            if r["status"] == "succeeded" and not (r["raw_output"] or "").strip():
                fail(f"run {r['pk']} succeeded without raw output")
        return out

    def report(self, outcome: Outcome) -> str:
        text = outcome.figures()
        lines = [text]
        if self.refusals:
            lines.append("launches refused (launched again later):")
            lines += [f"  {n} x {e}" for e, n in self.refusals.most_common(5)]
        lines.append("faults:")
        for f in self.plan:
            rec = f"{f.recovery:.1f} s" if f.recovery is not None else "-"
            started = f"{f.started:.1f}" if f.started is not None else "never"
            lines.append(
                f"  {f.describe()}{' [with previous]' if f.with_previous else ''}: at {started}"
                f" s, recovered {rec}{'; ' + f.note if f.note else ''}"
            )
        (self.tmp / "soak-report.json").write_text(
            json.dumps(
                {
                    "seed": outcome.config.seed,
                    "runs": outcome.runs,
                    "states": dict(outcome.states),
                    "wall_s": outcome.wall,
                    "faults": [f.as_dict() for f in self.plan],
                    "failures": outcome.failures,
                },
                indent=1,
            )
        )
        return "\n".join(lines)


def _last(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[-1][:200] if lines else type(exc).__name__


def _short(error: str) -> str:
    """A failed run's error without what differs from run to run (paths, numbers)."""
    text = re.sub(r"/\S+", "<path>", error.splitlines()[0] if error else "")
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return text[:160]
