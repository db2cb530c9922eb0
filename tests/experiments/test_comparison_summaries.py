"""A comparison computed from the configuration summaries (experiments.summaries) is the one
the metric rows give (issue 17): same points, statistics, flags, sentences and charts, for
specs over every dimension of the configuration, normalisations, peaks, repetitions drawn
and pooled configurations; specs over single runs' attributes read the metric rows."""

from __future__ import annotations

import math
import re

import pytest

from experiments.comparison import ComparisonSpec, compute
from experiments.comparison.computation import summarisable
from experiments.models import Matrix, Run, Target, TuningSet
from experiments.results import replace_metrics
from tests.lab import make_testbed

pytestmark = pytest.mark.django_db

SPECS = [
    "metric=write_bw&x=param:threads&series=arch",
    "metric=write_bw&metric=read_bw&x=param:threads&series=raid&baseline=10&ignore=hardware",
    "metric=write_bw&x=tool&series=testbed",
    "metric=write_bw&x=param:threads&series=tuning&reps=1",
    "metric=write_bw&x=param:threads&series=source",
    "metric=write_bw&x=param:threads&series=arch&norm=server",
    "metric=write_bw&x=param:threads&series=arch&norm=client",
    "metric=write_bw&x=param:threads&series=arch&norm=core",
    "metric=write_bw&x=param:threads&series=arch&norm=target",
    "metric=write_bw&x=param:threads&series=arch&stat=peak",
    "metric=write_bw&x=param:threads&y=arch&chart=heatmap",
    "metric=write_bw&x=param:bs&series=hw:cores&f=param:threads:4",
    "metric=write_bw&x=param:threads&series=arch&tool=fio&ignore=param:bs",
    "metric=write_bw&x=param:threads&series=fs&f=arch:aarch64&f=arch:x86_64",
    "metric=read_bw&x=&series=arch&error=minmax",
    "metric=write_bw&x=param:threads&series=tuning:storage.tuneNumWorkers",
]


@pytest.fixture
def lab(alice):
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


def _same(a, b, where="") -> None:
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (a != a and b != b), where
    elif isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), where
        for key in a:
            _same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, str) and isinstance(b, str) and a != b:
        # Sentences print statistics to a few digits: equal once the numbers are.
        numbers = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
        assert numbers.sub("#", a) == numbers.sub("#", b), where
        for x, y in zip(numbers.findall(a), numbers.findall(b), strict=True):
            assert math.isclose(float(x), float(y), rel_tol=1e-3), where
    else:
        assert a == b, where


def _comparable(result) -> dict:
    out = result.to_json()
    out.pop("generated_at", None)
    out["points"] = sorted(out["points"], key=lambda p: repr(sorted(p.items())))
    return out


def test_summaries_give_the_metric_rows_result(lab):
    for query in SPECS:
        spec = ComparisonSpec.from_query(query)
        assert summarisable(spec), query
        from_summaries = compute(spec)
        from_rows = compute(spec, summaries=False)
        assert from_rows.points and not from_rows.errors, query
        _same(_comparable(from_summaries), _comparable(from_rows), query)


def test_single_run_attributes_read_the_metric_rows(lab):
    for query in [
        "metric=write_bw&x=param:threads&series=matrix",
        "metric=write_bw&x=param:threads&f=matrix:sweep",
        "metric=write_bw&x=param:threads&bottleneck=disk",
        "metric=write_bw&x=param:threads&from=2020-01-01",
        f"metric=write_bw&x=param:threads&matrix={lab.uuid}",
    ]:
        assert not summarisable(ComparisonSpec.from_query(query)), query
    assert not summarisable(ComparisonSpec.from_query("metric=write_bw"), Run.objects.filter(pk=1))
    spec = ComparisonSpec.from_query(f"metric=write_bw&x=param:threads&matrix={lab.uuid}")
    assert sum(p.n for p in compute(spec).points) == 12
