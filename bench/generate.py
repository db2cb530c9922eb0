"""Fill the bench database with a lab's worth of results: 100,000 runs (default), 7 primary
metrics and 10 parameters each, over 10 testbeds on three architectures, 10 tuning sets and
99 fio matrices of 1,000 runs each (1% of the runs apiece) plus 1,000 imported IOR runs
spread over every testbed (another 1%).

    .venv/bin/python bench/generate.py [--runs 100000] [--matrices N] [--reset]

With ``--matrices N`` (issue 30: ``--runs 1000000 --matrices 10000``) the matrix runs are
spread over N matrices instead: the first holds 10,000 runs, the second 10, the others share
the rest evenly (about 99 each at a million runs).

Rows go in with PostgreSQL's COPY (runs and metrics, each run with its configuration key), in
one transaction, then the configuration summaries are built from them
(experiments.results.summaries.rebuild, what ``manage.py rebuild_summaries`` runs). 100,000 runs
take well under a minute, 1,000,000 a few minutes. Only the dedicated bench database is
touched (bench/common.py).
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import json
import random
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402

MATRIX_RUNS = 1000
METRICS = [
    ("write_bw", "B/s", "value"),
    ("read_bw", "B/s", "value"),
    ("write_iops", "op/s", "value"),
    ("read_iops", "op/s", "value"),
    ("write_lat", "s", "mean"),
    ("read_lat", "s", "mean"),
    ("elapsed", "s", "value"),
]
ARCHES = [("x86_64", "Xeon Gold 6248"), ("aarch64", "Kunpeng 920"), ("ppc64le", "POWER9")]


def copy_rows(cursor, table: str, columns: list[str], rows) -> None:
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument(
        "--matrices",
        type=int,
        default=None,
        help="spread the matrix runs over this many matrices (one of 10,000 runs, one of 10)",
    )
    parser.add_argument("--reset", action="store_true", help="delete the bench data first")
    args = parser.parse_args()
    common.ensure_database()
    common.setup_django()

    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    from experiments.models import (
        ConfigSummary,
        HardwareProfile,
        Matrix,
        Metric,
        Node,
        Run,
        Target,
        Testbed,
        TestbedNode,
        TuningSet,
    )
    from experiments.results import summaries

    started = time.perf_counter()
    rng = random.Random(7)
    user_model = get_user_model()
    with transaction.atomic():
        if args.reset:
            ConfigSummary.objects.all()._raw_delete(ConfigSummary.objects.db)
            Metric.objects.all()._raw_delete(Metric.objects.db)
            Run.objects.all()._raw_delete(Run.objects.db)
            Matrix.objects.all().delete()
            TestbedNode.objects.all().delete()
            Target.objects.all().delete()
            Testbed.objects.all().delete()
            Node.objects.all().delete()
            HardwareProfile.objects.all().delete()
            TuningSet.objects.filter(parent__isnull=False).delete()
            TuningSet.objects.all().delete()
        if Run.objects.exists():
            print(
                f"the bench database already holds {Run.objects.count()} runs "
                "(use --reset to start over)"
            )
            return
        user, _ = user_model.objects.get_or_create(username="bench")
        Token.objects.get_or_create(user=user)
        profiles = [
            HardwareProfile.objects.create(
                owner=user,
                name=f"{arch} server",
                architecture=arch,
                cpu_model=cpu,
                sockets=2,
                cores_per_socket=32,
            )
            for arch, cpu in ARCHES
        ]
        testbeds, nodes = [], []
        for t in range(10):
            profile = profiles[t % 3]
            tb = Testbed.objects.create(
                owner=user,
                name=f"cluster-{t:02d}",
                fabric=["infiniband", "ethernet"][t % 2],
                beegfs_version=["7.3.4", "7.4.5"][t % 2],
            )
            for n in range(2):
                node = Node.objects.create(owner=user, hostname=f"c{t:02d}n{n}", profile=profile)
                nodes.append(node)
                TestbedNode.objects.create(
                    testbed=tb,
                    node=node,
                    storage=n == 0,
                    metadata=n == 0,
                    management=n == 0,
                    client=n == 1,
                )
                if n == 0:
                    Target.objects.create(
                        testbed=tb,
                        node=node,
                        kind="storage",
                        raid_level=["0", "10"][t % 2],
                        disks=4,
                        count=6,
                        filesystem=["xfs", "ext4"][t % 2],
                    )
            testbeds.append(tb)
        tunings = []
        for s in range(10):
            ts = TuningSet.objects.create(owner=user, name=f"tuning-{s:02d}")
            ts.replace_params(
                [
                    ("storage", "tuneNumWorkers", str(8 * (s + 1))),
                    ("striping", "chunksize", f"{2 ** (s % 5 + 9) // 1024}k"),
                    ("os", "vm.dirty_ratio", str(10 + s)),
                ]
            )
            tunings.append(ts)
        in_matrices = max(MATRIX_RUNS, args.runs - MATRIX_RUNS)
        if args.matrices:
            n_matrices = max(3, args.matrices)
            big, small = min(10_000, in_matrices // 4), 10
            rest = in_matrices - big - small
            sizes_ = [big, small] + [
                rest // (n_matrices - 2) + (k < rest % (n_matrices - 2))
                for k in range(n_matrices - 2)
            ]
        else:
            n_matrices = max(1, (args.runs - MATRIX_RUNS) // MATRIX_RUNS)
            sizes_ = [MATRIX_RUNS] * n_matrices
        # starts[m]: the index of matrix m's first run; runs from sum(sizes_) on are imported.
        starts = [0]
        for size in sizes_:
            starts.append(starts[-1] + size)
        matrix_total = starts[-1]
        matrices = Matrix.objects.bulk_create(
            Matrix(
                owner=user,
                name=f"fio sweep {m:05d}" if args.matrices else f"fio sweep {m:03d}",
                tool="fio",
                repetitions=5,
                fixed_params={"size": "4g", "direct": 1, "ioengine": "libaio"},
                axes=[
                    {"param": "numjobs", "values": [1, 2, 4, 8, 16, 32, 64]},
                    {"param": "bs", "values": ["4k", "64k", "1m", "4m"]},
                    {"param": "rw", "values": ["write", "read"]},
                ],
                launched_at=timezone.now(),
            )
            for m in range(n_matrices)
        )
        Matrix.testbeds.through.objects.bulk_create(
            Matrix.testbeds.through(matrix_id=matrix.pk, testbed_id=testbeds[m % 10].pk)
            for m, matrix in enumerate(matrices)
        )
        Matrix.tuning_sets.through.objects.bulk_create(
            Matrix.tuning_sets.through(matrix_id=matrix.pk, tuningset_id=tunings[(m // 10) % 10].pk)
            for m, matrix in enumerate(matrices)
        )

        run_fields = [f for f in Run._meta.concrete_fields if f.attname != "id"]
        template = Run(testbed=testbeds[0], tool="fio")
        base = {f.attname: getattr(template, f.attname) for f in run_fields}
        json_fields = {f.attname for f in run_fields if f.get_internal_type() == "JSONField"}
        columns = [connection.ops.quote_name(f.column) for f in run_fields]
        with connection.cursor() as cursor:
            cursor.execute("SELECT COALESCE(MAX(id), 0) FROM experiments_run")
            first_id = cursor.fetchone()[0] + 1
        now = timezone.now()
        sizes = {"4k": 4096, "64k": 65536, "1m": 1 << 20, "4m": 4 << 20}

        def runs():
            for i in range(args.runs):
                in_matrix = i < matrix_total
                m = bisect.bisect_right(starts, i) - 1 if in_matrix else 0
                threads = [1, 2, 4, 8, 16, 32, 64][i % 7]
                bs = ["4k", "64k", "1m", "4m"][(i // 7) % 4]
                rw = ["write", "read"][(i // 28) % 2]
                testbed = testbeds[m % 10] if in_matrix else testbeds[i % 10]
                tuning = tunings[(m // 10) % 10] if in_matrix else tunings[i % 10]
                params = {
                    "threads": threads,
                    "nodes": 1 + i % 4,
                    "tasks_per_node": threads,
                    "transfer_size": sizes[bs],
                    "block_size": sizes[bs] * 1024,
                    "file_size": 4 << 30,
                    "iodepth": [1, 4, 16, 32][i % 4],
                    "direct": True,
                    "rw": rw,
                    "ioengine": "libaio",
                }
                created = now - timedelta(seconds=(args.runs - i) * 300)
                tool = "fio" if in_matrix else "ior"
                key = summaries.config_key(tool, testbed.pk, None, tuning.pk, params, False, "")
                row = {
                    **base,
                    "uuid": uuid.UUID(int=rng.getrandbits(128), version=4),
                    "owner_id": user.pk,
                    "created": created,
                    "updated": created,
                    "testbed_id": testbed.pk,
                    "tuning_set_id": tuning.pk,
                    "tool": tool,
                    "config_key": key,
                    "tool_version": "fio-3.28",
                    "status": "succeeded" if in_matrix else "imported",
                    "label": f"{'fio' if in_matrix else 'ior'} {rw} bs={bs} numjobs={threads}",
                    "command": f"fio --rw={rw} --bs={bs} --numjobs={threads}",
                    "params": params,
                    "exit_code": 0,
                    "started_at": created,
                    "finished_at": created + timedelta(seconds=60),
                }
                if in_matrix:
                    offset = i - starts[m]
                    cell = f"{m}:{offset % 56}"
                    row.update(
                        matrix_id=matrices[m].pk,
                        cell_key=hashlib.sha1(cell.encode()).hexdigest()[:64],
                        repetition=offset // 56 + 1,
                    )
                yield [
                    json.dumps(row[f.attname]) if f.attname in json_fields else row[f.attname]
                    for f in run_fields
                ]

        def metrics():
            for i in range(args.runs):
                run_id = first_id + i
                scale = 1 + (i % 7)
                for name, unit, stat in METRICS:
                    if unit == "B/s":
                        value = scale * 4e8 * rng.uniform(0.8, 1.2)
                    elif unit == "op/s":
                        value = scale * 2e4 * rng.uniform(0.8, 1.2)
                    else:
                        value = rng.uniform(0.0001, 0.01) if name.endswith("lat") else 60.0
                    yield [run_id, name, value, unit, stat, None, True, "{}", ""]

        with connection.cursor() as cursor:
            raw = cursor.cursor
            copy_rows(
                raw,
                "experiments_run",
                ["id", *columns],
                ([first_id + i, *row] for i, row in enumerate(runs())),
            )
            t_runs = time.perf_counter()
            copy_rows(
                raw,
                "experiments_metric",
                [
                    "run_id",
                    "name",
                    "value",
                    "unit",
                    "stat",
                    "iteration",
                    '"primary"',
                    "extra",
                    "source_ref",
                ],
                metrics(),
            )
            raw.execute(
                "SELECT setval(pg_get_serial_sequence('experiments_run', 'id'), "
                "(SELECT MAX(id) FROM experiments_run))"
            )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE experiments_run")
        cursor.execute("ANALYZE experiments_metric")
    t_summaries = time.perf_counter()
    rows = summaries.rebuild()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE experiments_configsummary")
    print(f"{rows:,} configuration summary rows in {time.perf_counter() - t_summaries:.1f} s")
    elapsed = time.perf_counter() - started
    n_metrics = args.runs * len(METRICS)
    print(
        f"generated {args.runs:,} runs and {n_metrics:,} metrics in {elapsed:.1f} s "
        f"(runs copied after {t_runs - started:.1f} s) into {common.DB_NAME}"
    )


if __name__ == "__main__":
    main()
