"""What the typed parameter rows (experiments.models.params, issue 30) cost a bulk ingest: the
PostgreSQL CPU of COPYing runs into experiments_run, 500 a statement as the bulk API stores
them, with the trigger that writes their typed rows, without it, and (the alternative that
was weighed) without it but with one expression index per parameter people sort by,
``((params -> 'NAME'), created, id)``, for the parameters the runs carry.

The runs are copies of the newest ``--runs`` bench runs (parameters as generate.py makes
them: 10 a run) with fresh client keys; each variant copies them in on one connection, one
transaction per 500, and deletes them again. The figure is the backend's CPU time (from
/proc: user + system) per 500 runs, median of ``--rounds``; wall time is the machine's.

    BENCH_DB=beeweb_1m_<you> .venv/bin/python bench/params_ingest.py [--runs 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402

BATCH = 500
AXES = (
    "threads",
    "nodes",
    "tasks_per_node",
    "transfer_size",
    "block_size",
    "file_size",
    "iodepth",
    "direct",
    "rw",
    "ioengine",
)


def ticks(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import psycopg

    conn = psycopg.connect(common.database_url(), autocommit=True)
    pid = conn.info.backend_pid
    columns = [
        r[0]
        for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = "
            "'experiments_run' AND column_name NOT IN ('id', 'client_key') "
            "ORDER BY ordinal_position"
        )
    ]
    names = ", ".join(f'"{c}"' for c in columns)
    # New uuids, and out of their matrix (a cell's repetition is unique in it).
    fresh = {"uuid": "gen_random_uuid()", "matrix_id": "NULL"}
    select = ", ".join(fresh.get(c, f'"{c}"') for c in columns)
    lines: list[bytes] = []
    with conn.cursor().copy(
        f"COPY (SELECT {select} FROM experiments_run ORDER BY created DESC, id DESC "
        f"LIMIT {args.runs}) TO STDOUT"
    ) as copy:
        for row in copy:
            lines.append(bytes(row))
    data = b"".join(lines).splitlines(keepends=True)
    batches = [b"".join(data[i : i + BATCH]) for i in range(0, len(data), BATCH)]
    target = f"experiments_run ({names})"

    def load() -> list[float]:
        costs = []
        for batch in batches:
            with conn.transaction():
                before = ticks(pid)
                with conn.cursor().copy(f"COPY {target} FROM STDIN") as copy:
                    copy.write(batch)
                costs.append(ticks(pid) - before)
        return costs

    def clean() -> None:
        conn.execute("DELETE FROM experiments_run WHERE id > %s", [first_new])
        conn.execute("VACUUM experiments_run")
        conn.execute("VACUUM experiments_runparam")

    first_new = conn.execute("SELECT max(id) FROM experiments_run").fetchone()[0]
    trigger = "experiments_run_params_added"
    expression = [
        f"CREATE INDEX IF NOT EXISTS bench_param_{n} ON experiments_run "
        f"((params -> '{n}'), created, id) WHERE params ? '{n}'"
        for n in AXES
    ]
    variants = {
        "no typed rows, no expression index": (
            [f"ALTER TABLE experiments_run DISABLE TRIGGER {trigger}"],
            [],
        ),
        "typed rows by the trigger": (
            [f"ALTER TABLE experiments_run ENABLE TRIGGER {trigger}"],
            [],
        ),
        f"expression indexes on {len(AXES)} parameters instead": (
            [f"ALTER TABLE experiments_run DISABLE TRIGGER {trigger}", *expression],
            [f"DROP INDEX IF EXISTS bench_param_{n}" for n in AXES],
        ),
    }
    print(
        f"database {common.DB_NAME}: COPY of {len(data):,} runs in {len(batches)} statements "
        f"of {BATCH}, load average {os.getloadavg()[0]:.1f}"
    )
    try:
        results = {}
        for label, (setup, teardown) in variants.items():
            for sql in setup:
                conn.execute(sql)
            rounds, walls = [], []
            for _ in range(args.rounds):
                started = time.perf_counter()
                costs = load()
                walls.append(time.perf_counter() - started)
                rounds.append(sum(costs) / len(costs) * 1000)
                clean()
            for sql in teardown:
                conn.execute(sql)
            results[label] = statistics.median(rounds)
            print(
                f"{label}: {results[label]:.1f} ms PostgreSQL CPU per {BATCH} runs "
                f"(rounds {', '.join(f'{r:.1f}' for r in rounds)}; wall "
                f"{statistics.median(walls) / len(batches) * 1000:.1f} ms)",
                flush=True,
            )
    finally:
        conn.execute(f"ALTER TABLE experiments_run ENABLE TRIGGER {trigger}")
        for n in AXES:
            conn.execute(f"DROP INDEX IF EXISTS bench_param_{n}")
        conn.execute("DELETE FROM experiments_run WHERE id > %s", [first_new])
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
