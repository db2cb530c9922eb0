"""How long one bulk ingest request of N real tool outputs takes: the figures behind
``experiments.results.ingest.MAX_ITEMS`` and ``MAX_REQUEST_BYTES``.

A real gunicorn (one worker, so one request at a time as the worst case of a busy server) on
the bench's PostgreSQL database receives, one after the other, JSON arrays of N items whose
``raw_output`` is a real tool output from ``../shared/samples`` (see PROVENANCE.md), parsed on
the server. Prints, per request: items, body size, wall time, runs created and the status.

    .venv/bin/python bench/ingest_limits.py [--items 250 500 1000 2000] [--glob 'fio/*.json']
        [--largest] [--metrics K] [--limit-check]

``--glob`` picks the samples (cycled through); ``--largest`` repeats only the largest of them
(the most parsing per item). With ``--limit-check`` the server keeps its limits (requests above
them answer 413); without it the limits are lifted for the measurement
(``BEEWEB_BULK_MAX_ITEMS``/``BEEWEB_BULK_MAX_BYTES``). The ingested runs are deleted afterwards.
Use ``BENCH_DB`` for a database of your own (default ``beeweb_bench``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common  # noqa: E402

SAMPLES = Path(
    os.environ.get("BEEWEB_SAMPLES_DIR") or common.ROOT.parent / "shared" / "samples"
).resolve()
TESTBED = "ingest-limits"


def samples(pattern: str, largest: bool) -> list[str]:
    files = sorted(p for p in SAMPLES.glob(pattern) if p.is_file())
    if not files:
        raise SystemExit(f"no samples match {pattern!r} under {SAMPLES}")
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    return [max(texts, key=len)] if largest else texts


def body(n: int, texts: list[str], tag: str, metrics: int = 0) -> bytes:
    """N items with raw output, or with ``metrics`` explicit metrics each instead."""
    items = []
    for i in range(n):
        item: dict = {"key": f"ingest-limits-{tag}-{i}", "testbed": TESTBED}
        if metrics:
            item["tool"] = "fio"
            item["metrics"] = [
                {"name": "write_bw", "value": 1e9 + k, "iteration": k} for k in range(metrics)
            ]
        else:
            item["raw_output"] = texts[i % len(texts)]
        items.append(item)
    return json.dumps(items).encode()


def setup() -> str:
    """The bench user's token and a testbed of its own in the bench database."""
    common.setup_django()
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from experiments.models import Testbed

    user, _ = get_user_model().objects.get_or_create(username="ingest-limits")
    Testbed.objects.get_or_create(owner=user, name=TESTBED)
    return Token.objects.get_or_create(user=user)[0].key


def cleanup() -> None:
    from experiments.models import Metric, Run

    runs = Run.objects.filter(client_key__startswith="ingest-limits-")
    Metric.objects.filter(run__in=runs.values("id"))._raw_delete(Metric.objects.db)
    runs._raw_delete(Run.objects.db)


def post(url: str, token: str, data: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{url}/api/runs/bulk/",
        data=data,
        method="POST",
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        text = exc.read()
        try:
            return exc.code, json.loads(text)
        except ValueError:
            return exc.code, {"body": text[:200].decode(errors="replace")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, nargs="+", default=[250, 500, 1000, 2000])
    parser.add_argument("--glob", default="fio/*.json")
    parser.add_argument("--largest", action="store_true")
    parser.add_argument("--limit-check", action="store_true")
    parser.add_argument("--metrics", type=int, default=0, help="explicit metrics per item")
    args = parser.parse_args()
    if not args.limit_check:
        os.environ["BEEWEB_BULK_MAX_ITEMS"] = str(max(args.items))
        os.environ["BEEWEB_BULK_MAX_BYTES"] = str(1 << 30)
        os.environ["BEEWEB_BULK_MAX_METRICS"] = str(1 << 30)
        os.environ["BEEWEB_MAX_REQUEST_BYTES"] = str(1 << 30)
    texts = samples(args.glob, args.largest)
    common.ensure_database()
    token = setup()
    tag = str(int(time.time()))
    print(common.machine())
    if args.metrics:
        print(f"items with {args.metrics} explicit metrics each, no raw output")
    else:
        print(
            f"samples: {args.glob}{' (largest only)' if args.largest else ''}: "
            f"{len(texts)} files, {sum(map(len, texts)) / len(texts) / 1024:.1f} KiB on average"
        )
    with common.gunicorn(workers=1) as (url, _):
        post(url, token, body(2, texts, tag + "-warm"))  # imports, connections
        for n in args.items:
            data = body(n, texts, f"{tag}-{n}", args.metrics)
            started = time.perf_counter()
            code, answer = post(url, token, data)
            elapsed = time.perf_counter() - started
            detail = (
                f"{answer.get('created', 0)} created"
                if code == 200
                else str(answer.get("detail", answer))[:120]
            )
            print(
                f"{n:6d} items  {len(data) / 2**20:7.1f} MiB  {elapsed:6.2f} s  "
                f"{n / elapsed:7.0f} items/s  {len(data) / 2**20 / elapsed:5.2f} MiB/s  "
                f"HTTP {code}: {detail}",
                flush=True,
            )
    cleanup()


if __name__ == "__main__":
    main()
