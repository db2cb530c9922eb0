"""Finished fio matrices: for the runs table and parallel-coordinates tests (``make_sweep``:
write throughput over numjobs (1, 2, 4, 8) × bs (64k, 1m) on one testbed, two repetitions,
values chosen so that larger blocks and more jobs are faster), and for the comparison pages'
browser tests (``local_fio_matrix``, on the localhost testbed); ``qd_matrix``, latency against
iodepth, for the matrix page's IOPS-and-latency charts."""

from __future__ import annotations

from experiments.inventory.localhost import ensure_localhost_testbed
from experiments.matrices.expansion import expand
from experiments.models import Matrix, Run
from experiments.results.store import replace_metrics
from tests.helpers.comparison import make_testbed


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


def local_fio_matrix(user):
    """A fio matrix on the localhost testbed, expanded and 'run': rw write/read x numjobs
    1, 2, 4 x 3 repetitions, with results stored as a finished run would store them."""
    testbed = ensure_localhost_testbed(user)
    matrix = Matrix.objects.create(
        owner=user,
        name="local fio",
        tool="fio",
        repetitions=3,
        fixed_params={"size": "16m", "bs": "1m", "direct": False},
        axes=[
            {"param": "rw", "values": ["write", "read"]},
            {"param": "numjobs", "values": [1, 2, 4]},
        ],
    )
    matrix.testbeds.add(testbed)
    expand(matrix)
    for run in Run.objects.filter(matrix=matrix):
        jobs, rep = int(run.params["numjobs"]), run.repetition
        value = 1e9 * jobs * (1.5 if run.params["rw"] == "read" else 1.0) + rep * 1e7
        name = "read_bw" if run.params["rw"] == "read" else "write_bw"
        replace_metrics(run, [{"name": name, "value": value, "unit": "B/s"}])
        run.status = Run.Status.SUCCEEDED
        run.save(update_fields=["status"])
    return matrix


def qd_matrix(owner) -> Matrix:
    """A finished fio random-read sweep of iodepth (1, 4, 16, 64) × bs (4k, 64k) on a testbed
    "qd-lab": IOPS rising to iodepth 16 and p50/p99/p99.9 completion latencies per run."""
    tb = make_testbed(owner, "qd-lab", "x86_64", "0")
    matrix = Matrix.objects.create(
        owner=owner,
        name="queue depth",
        tool="fio",
        fixed_params={"rw": "randread"},
        axes=[
            {"param": "iodepth", "values": [1, 4, 16, 64]},
            {"param": "bs", "values": ["4k", "64k"]},
        ],
    )
    matrix.testbeds.set([tb])
    for bs, scale in (("4k", 1.0), ("64k", 0.4)):
        for depth in (1, 4, 16, 64):
            run = Run.objects.create(
                owner=owner,
                testbed=tb,
                tool="fio",
                status="succeeded",
                matrix=matrix,
                cell_key=f"{depth}-{bs}",
                params={"rw": "randread", "bs": bs, "iodepth": depth},
            )
            iops = scale * 20000 * min(depth, 16) / (1 + min(depth, 16) / 8)
            p50 = depth / iops
            replace_metrics(
                run,
                [
                    {"name": "read_iops", "value": iops, "unit": "op/s"},
                    {"name": "read_bw", "value": iops * 4096, "unit": "B/s"},
                    {"name": "read_lat", "value": p50, "unit": "s", "stat": "p50"},
                    {"name": "read_lat", "value": p50 * 3, "unit": "s", "stat": "p99"},
                    {"name": "read_lat", "value": p50 * 9, "unit": "s", "stat": "p99.9"},
                ],
            )
    return matrix
