"""The chaos soak's fault plan: which faults, in which order, on which node, for how long, drawn
from ``random.Random(seed)`` before anything runs, so a seed names the same plan on any machine
(what a run of it meets, the interleaving with the runs, depends on the machine; the plan does
not).

A fault fires once the soak's runs have made a given amount of progress (a count of runs
ended), not at a time, so a slow machine meets the same faults at the same points of its
workload. Every few faults, the next one fires while the previous one is still in force (two
faults within a minute)."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

# What the injector can do (tests/soak/harness.py carries each out).
KINDS = ("postgres", "redis", "worker", "beat", "link", "fill", "clock")
# Faults that hit one node; the others hit the whole installation.
NODE_KINDS = ("worker", "link", "fill", "clock")

DESCRIPTIONS = {
    "postgres": "PostgreSQL stopped (fast or immediate, i.e. crashed) and started again",
    "redis": "Redis killed (no persistence: every message lost) and started again",
    "worker": "a node's Celery worker SIGKILLed and started again",
    "beat": "Celery beat (the janitor's clock) SIGKILLed and started again",
    "link": "a node's network link set down and up again (ip link set ... down)",
    "fill": "a node's benchmark directory (a loop-mounted ext4) filled up and freed",
    "clock": "a node worker's clock stepped (libfaketime) and stepped back",
}


@dataclass
class Fault:
    """One fault of the plan, and what the soak recorded of it."""

    index: int
    kind: str
    node: str  # the node it hits ("" for postgres, redis, beat)
    after: int  # fires once this many runs have ended
    hold: float  # seconds it stays in force before it is repaired
    with_previous: bool = False  # fires while the previous fault is still in force
    detail: dict = field(default_factory=dict)
    # What happened (seconds since the soak's start, its monotonic clock):
    started: float | None = None
    repaired: float | None = None
    recovered: float | None = None  # first run claimed or ended in its scope after repair
    note: str = ""

    @property
    def recovery(self) -> float | None:
        """Seconds from the fault to the first progress after its repair (None: no work was
        left to show it)."""
        if self.started is None or self.recovered is None:
            return None
        return self.recovered - self.started

    def describe(self) -> str:
        where = f" on {self.node}" if self.node else ""
        extra = "".join(f"{k}={v}, " for k, v in self.detail.items())
        return f"#{self.index} {self.kind}{where} ({extra}held {self.hold:.1f} s)"

    def as_dict(self) -> dict:
        return {**asdict(self), "recovery": self.recovery}


def plan(
    seed: int,
    runs: int,
    faults: int,
    kinds: tuple[str, ...] = KINDS,
    nodes: tuple[str, ...] = ("node1", "node2", "node3"),
    stale: float = 5.0,
    per_kind: int = 0,
) -> list[Fault]:
    """``faults`` faults (at least ``per_kind`` of each of ``kinds``, and at least one of each
    when there are enough), in random order, spread between 5 % and 85 % of ``runs`` ended.
    ``stale`` is the workers' RUN_STALE_SECONDS: a link is down for up to three times as long,
    so some cut-offs end before the janitor notices and some after."""
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
    if not kinds:
        return []
    rng = random.Random(seed)
    chosen = [kind for kind in kinds for _ in range(per_kind)]
    if faults >= len(kinds):
        chosen += [kind for kind in kinds if kind not in chosen]
    while len(chosen) < faults:
        chosen.append(rng.choice(kinds))
    rng.shuffle(chosen)
    first, last = max(1, runs * 5 // 100), max(2, runs * 85 // 100)
    out: list[Fault] = []
    for index, kind in enumerate(chosen):
        after = first + (last - first) * index // max(1, len(chosen))
        node = rng.choice(nodes) if kind in NODE_KINDS else ""
        detail: dict = {}
        if kind == "postgres":
            detail["mode"] = rng.choice(("fast", "immediate"))
            hold = rng.uniform(0.5, 4.0)
        elif kind == "redis":
            hold = rng.uniform(0.5, 4.0)
        elif kind in ("worker", "beat"):
            hold = rng.uniform(0.5, stale)
        elif kind == "link":
            hold = rng.uniform(1.0, 3.0 * stale)
        elif kind == "fill":
            hold = rng.uniform(2.0, 8.0)
        else:  # clock
            detail["step_s"] = rng.choice((-1, 1)) * rng.randint(30, 600)
            hold = rng.uniform(2.0, 3.0 * stale)
        # Every fourth fault or so comes while the one before is still in force: two at a
        # time at most, never two of one kind on one target nor two on one node.
        with_previous = bool(out) and _pairs(out[-1], kind, node) and rng.random() < 0.25
        out.append(
            Fault(index, kind, node, after, round(hold, 2), with_previous, detail)  # type: ignore[arg-type]
        )
    if len(out) >= 2 and not any(f.with_previous for f in out):
        # At least one pair within a minute.
        for fault in out[1:]:
            if _pairs(out[fault.index - 1], fault.kind, fault.node):
                fault.with_previous = True
                break
    for fault in out:
        if fault.with_previous:
            fault.after = out[fault.index - 1].after
    return out


def _pairs(before: Fault, kind: str, node: str) -> bool:
    """Whether a fault of ``kind`` on ``node`` may come while ``before`` is in force: not a
    third at once, not the same kind on the same target, not a second fault of one node."""
    if before.with_previous or (before.kind == kind and before.node == node):
        return False
    return not (node and node == before.node)
