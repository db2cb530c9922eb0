"""End to end: adaptive repetitions and run order with a real Celery worker and real fio.

One matrix, two cells that each write six 4 KiB blocks rated at 40 KiB/s: issued evenly
(``rate_process=linear``) a run takes 0.5 s (on an idle machine the same every time, CV well
under 1%); issued as Poisson arrivals with a new random sequence each run
(``rate_process=poisson``, ``randrepeat=0``) its duration is a sum of exponential gaps (CV
~40%). With at least 3, at most 6 runs until the CV is at most 2%, each cell gets the runs the
rule gives for the values its runs measured, in their order (the first n >= 3 whose CV is at
most 2% settles it, else it is flagged after 6): the linear cell settles at 3 runs on an idle
machine, and one whose wake-ups are late by a few milliseconds may spread it past 2% (issue 24:
the test judges the rule on what was measured, not how steady the machine is); the Poisson
cell runs 6 and is flagged as never settled by design: the chance that three Poisson runs
fall within 2% is about 0.3%, and load only adds noise. (Time-based runs of one second were
not steady under load: fio then wrote 10 or 11 blocks, a 10% step; an uncapped cell's noise
came from the machine's load, and a quiet CI machine made it steady.)
Runs start in the order they were created: interleaved, or shuffled by a recorded seed
(the same seed, the same order), on Redis and on the embedded default's filesystem broker
alike (beeweb/broker.py: kombu's own took messages sent within one millisecond in a random
order, and runs 3 and 4 of a launch started swapped)."""

from __future__ import annotations

import shutil
import socket
import statistics

import pytest

from tests import labs
from tests.labs import Stack

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
]
HOST = socket.gethostname()
QUEUE = f"node.{HOST}"

ADAPTIVE = """\
name: adaptive fio
tool: fio
testbeds: [localhost]
repetitions: {min: 3, max: 6, cv: 2}
order: interleaved
drop_caches: false
timeout_s: 120
params: {rw: write, bs: 4k, size: 24k, rate: 40k, randrepeat: false}
axes:
  rate_process: [linear, poisson]
"""

SHUFFLED = """\
name: shuffled NAME
tool: fio
testbeds: [localhost]
repetitions: 2
order: random
order_seed: 7
drop_caches: false
timeout_s: 60
params: {rw: write, size: 256k}
axes:
  bs: [4k, 8k, 16k]
"""


@pytest.fixture
def stack(localhost_stack):
    """The localhost stack with this host's node worker."""
    localhost_stack.worker(QUEUE, f"node@{HOST}")
    return localhost_stack


def _launch(stack: Stack, tmp_path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    result = stack.manage(
        "launch_matrix", str(path), "--wait", "--timeout", "600", check=False, timeout=700
    )
    assert result.returncode == 0, (
        result.stdout + result.stderr + stack.worker_log(f"node@{HOST}")[-3000:]
    )
    return result.stdout


def _report(stack: Stack, name: str) -> dict:
    """Per run in start order: its cell's parameter, repetition and pk; per cell its state."""
    runs = sorted(labs.runs(stack, name), key=lambda r: (r["started_at"], r["pk"]))
    ((matrix, seed),) = stack.sql(
        f"SELECT id, order_seed FROM experiments_matrix WHERE name = '{name}'"
    )
    cells = stack.sql(
        "SELECT cell_key, state, n, runs, cv, reason, metric FROM experiments_cellstate "
        f"WHERE matrix_id = {matrix}"
    )
    return {
        "runs": [
            {
                "params": r["params"],
                "rep": r["repetition"],
                "pk": r["pk"],
                "status": r["status"],
                "bw": r["metrics"].get("write_bw"),
            }
            for r in runs
        ],
        "states": {key: list(state) for key, *state in cells},
        "keys": {
            r["params"]["rate_process"]: r["cell_key"]
            for r in runs
            if "rate_process" in r["params"]
        },
        "seed": seed,
    }


def cv(values: list[float]) -> float:
    """Sample standard deviation over the mean, in percent."""
    return 100 * statistics.stdev(values) / statistics.fmean(values)


def settles_at(values: list[float], minimum: int = 3, maximum: int = 6, target: float = 2):
    """The rule on a cell's values in the order its runs measured them: the first number of
    runs (from ``minimum``) whose CV is at most ``target``, else None (flagged at
    ``maximum``)."""
    for n in range(minimum, maximum + 1):
        if cv(values[:n]) <= target:
            return n
    return None


def test_adaptive_repetitions_add_runs_until_a_cell_settles_and_flag_a_noisy_one(stack, tmp_path):
    out = _launch(stack, tmp_path, "adaptive", ADAPTIVE)
    assert "6-12 runs" in out and "queued 6 runs" in out
    report = _report(stack, "adaptive fio")
    runs = report["runs"]
    assert all(r["status"] == "succeeded" for r in runs), runs
    # Interleaved: every cell's first run, then every cell's second, … in creation order;
    # the runs added to a cell come after.
    cells = [(r["params"]["rate_process"], r["rep"]) for r in runs]
    assert cells[:6] == [(p, rep) for rep in (1, 2, 3) for p in ("linear", "poisson")]
    assert all(rep > 3 for _, rep in cells[6:]), cells
    assert [r["pk"] for r in runs] == sorted(r["pk"] for r in runs)

    values = {
        process: [r["bw"] for r in runs if r["params"]["rate_process"] == process]
        for process in ("linear", "poisson")
    }
    states = {p: report["states"][report["keys"][p]] for p in ("linear", "poisson")}
    print(
        "\nadaptive fio: "
        + "; ".join(
            f"{p} cell {states[p][4]!r} (kB/s {[round(v / 1e3, 1) for v in values[p]]})"
            for p in ("linear", "poisson")
        )
    )
    # Each cell got the runs the rule gives for what its runs measured, in their order.
    for process in ("linear", "poisson"):
        state, n, count, stored_cv, reason, metric = states[process]
        got = values[process]
        assert [rep for p, rep in cells if p == process] == list(range(1, len(got) + 1))
        assert len(got) == n == count and metric == "write_bw", (process, states[process])
        assert stored_cv == pytest.approx(cv(got)), (process, stored_cv, got)
        at = settles_at(got)
        if at is not None:
            assert (state, n) == ("settled", at), (process, state, n, got)
            assert reason.startswith(f"n = {n}: CV ") and f"≤ 2% after {n} runs" in reason
        else:
            assert (state, n) == ("unsettled", 6), (process, state, n, got)
            assert reason.startswith("never settled: CV ") and "after the maximum 6 runs" in reason
    # The Poisson cell's spread is its arrivals' (CV ~40%), whatever the machine: flagged.
    assert states["poisson"][:2] == ["unsettled", 6], states


def test_runs_start_in_the_recorded_random_order(stack, tmp_path):
    orders = []
    for name in ("one", "two"):
        _launch(stack, tmp_path, name, SHUFFLED.replace("NAME", name))
        report = _report(stack, f"shuffled {name}")
        assert report["seed"] == 7
        runs = report["runs"]
        assert [r["pk"] for r in runs] == sorted(r["pk"] for r in runs)  # started as created
        orders.append([(r["params"]["bs"], r["rep"]) for r in runs])
    assert orders[0] == orders[1]
    # Parameter values are stored in their normal form: sizes in bytes.
    cell_by_cell = [(bs, rep) for bs in (4096, 8192, 16384) for rep in (1, 2)]
    assert sorted(orders[0]) == sorted(cell_by_cell) and orders[0] != cell_by_cell
