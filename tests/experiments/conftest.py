"""Fixtures the experiments tests share (with alice's world from tests/conftest.py)."""

from __future__ import annotations

import pytest

from experiments.models import Matrix, Run, Target, TuningSet
from experiments.results.store import replace_metrics
from tests.helpers.comparison import make_testbed


@pytest.fixture
def summaries_lab(alice):
    """Two testbeds (arm, x86) with runs over every dimension of a configuration: threads and
    block sizes, fio and ior, a tuning set, a target, a matrix "sweep" (returned), published
    runs with a source, and stored verdicts; the data of SUMMARISABLE_SPECS
    (tests/helpers/comparison.py)."""
    arm = make_testbed(alice, "arm-lab", "aarch64", "10")
    x86 = make_testbed(alice, "x86-lab", "x86_64", "0", cores=(1, 16))
    tuned = TuningSet.objects.create(owner=alice, name="tuned")
    tuned.replace_params([("storage", "tuneNumWorkers", "16")])
    matrix = Matrix.objects.create(owner=alice, name="sweep", tool="fio")
    values = iter([1.0e9, 1.1e9, 1.05e9, 2.0e9, 2.2e9, 1.9e9, 2.1e9, 3.3e9] * 40)
    for tb in (arm, x86):
        target = Target.objects.filter(testbed=tb).first()
        for threads in (1, 4, 16):
            for bs in ("4k", "1m"):
                for rep in range(3):
                    run = Run.objects.create(
                        testbed=tb,
                        tool="fio" if rep < 2 else "ior",
                        status="succeeded",
                        params={"threads": threads, "bs": bs, "nodes": 1 + rep % 2},
                        tuning_set=tuned if bs == "1m" else None,
                        target=target if threads == 16 and rep == 0 else None,
                        matrix=matrix if rep == 1 else None,
                        published=threads == 1 and rep == 2,
                        source="A study" if threads == 1 and rep == 2 else "",
                    )
                    replace_metrics(
                        run,
                        [
                            {"name": "write_bw", "value": next(values), "unit": "B/s"},
                            {"name": "read_bw", "value": next(values), "unit": "B/s"},
                        ],
                    )
                    if rep == 0:
                        Run.objects.filter(pk=run.pk).update(
                            bottleneck="disk", collapsed=threads == 4, write_steady=9e8,
                            write_whole=1e9,
                        )  # fmt: skip
    return matrix


@pytest.fixture
def fio_matrix(alice, bench):
    """A fio sweep of 8 cells (rw × numjobs), 3 repetitions, on ``bench``."""
    matrix = Matrix.objects.create(
        owner=alice,
        name="fio sweep",
        tool="fio",
        repetitions=3,
        timeout_s=120,
        fixed_params={"size": "8m", "bs": "1m"},
        axes=[
            {"param": "rw", "values": ["write", "read"]},
            {"param": "numjobs", "values": [1, 2, 4, 8]},
        ],
    )
    matrix.testbeds.set([bench])
    return matrix
