"""A finished fio matrix for the runs table and parallel-coordinates tests: write throughput
over numjobs (1, 2, 4, 8) × bs (64k, 1m) on one testbed, two repetitions, values chosen so
that larger blocks and more jobs are faster."""

from __future__ import annotations

from experiments.models import Matrix, Run
from experiments.results.store import replace_metrics
from tests.lab import make_testbed


def write_bw(numjobs: int, bs: str, repetition: int) -> float:
    return (numjobs * (4 if bs == "1m" else 1) + repetition * 0.5) * 1e8


def make_sweep(owner, name: str = "sweep") -> Matrix:
    tb = make_testbed(owner, f"{name}-lab", "x86_64", "0")
    matrix = Matrix.objects.create(
        owner=owner,
        name=name,
        tool="fio",
        repetitions=2,
        fixed_params={"rw": "write", "size": "8m"},
        axes=[
            {"param": "numjobs", "values": [1, 2, 4, 8]},
            {"param": "bs", "values": ["64k", "1m"]},
        ],
    )
    matrix.testbeds.set([tb])
    for numjobs in (1, 2, 4, 8):
        for bs in ("64k", "1m"):
            for repetition in (0, 1):
                run = Run.objects.create(
                    owner=owner,
                    testbed=tb,
                    tool="fio",
                    status="succeeded",
                    matrix=matrix,
                    cell_key=f"{numjobs}-{bs}",
                    repetition=repetition,
                    params={"rw": "write", "size": "8m", "numjobs": numjobs, "bs": bs},
                )
                value = write_bw(numjobs, bs, repetition)
                replace_metrics(run, [{"name": "write_bw", "value": value, "unit": "B/s"}])
    return matrix
