"""Storing, loading and exporting run telemetry (experiments.models.RunTelemetry).

The document a sampler returns (runners.telemetry, format in docs/telemetry.md) is split in
two: ``t``/``series``/``tool`` go into one zlib-compressed JSON blob (the bulk, read only by a
run page or an export), ``meta`` and a small ``summary`` stay plain JSON. ``export`` gives the
document back exactly as documented, so an import (issue 15, item 5) can take the same form.
"""

from __future__ import annotations

import json
import logging
import os
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction

from experiments.models import Run, RunTelemetry
from runners.telemetry import FORMAT, Sampler, read_fio_logs

log = logging.getLogger(__name__)

# Series whose peaks the summary keeps: what the bottleneck verdict and a filter look at.
SUMMARY_PREFIXES = ("disk_util:", "net_rx_bw:", "net_tx_bw:", "ib_rx_bw:", "ib_tx_bw:")


def _is_core(name: str) -> bool:
    return name.startswith(("cpu_busy:", "cpu_iowait:", "cpu_steal:"))


def _compress(body: dict[str, Any]) -> bytes:
    return zlib.compress(json.dumps(body, separators=(",", ":")).encode(), 6)


def pack(doc: dict[str, Any]) -> tuple[bytes, bytes]:
    """(data, cores): the node-wide series, the tool's series and ``cpu_busy_max`` (the
    busiest core per sample, derived here) in one blob; the per-core series in another.
    A run page reads the first only: per-core series are half of a large node's values and
    only an export needs them."""
    series = doc.get("series", {})
    cores = {n: v for n, v in series.items() if _is_core(n)}
    body: dict[str, Any] = {
        "t": doc.get("t", []),
        "series": {n: v for n, v in series.items() if not _is_core(n)},
    }
    busy = [v for n, v in cores.items() if n.startswith("cpu_busy:")]
    if busy:
        body["derived"] = {"cpu_busy_max": [max(values) for values in zip(*busy, strict=False)]}
    if doc.get("tool"):
        body["tool"] = doc["tool"]
    return _compress(body), _compress(cores) if cores else b""


def unpack(blob: bytes | memoryview) -> dict[str, Any]:
    return json.loads(zlib.decompress(bytes(blob))) if blob else {}


def summarize(series: dict[str, list]) -> dict[str, Any]:
    """Peak of each disk's utilisation and each link's throughput, of the whole node's and
    the busiest core's CPU, and of the tool's busiest process."""
    peaks: dict[str, float] = {}
    for name, values in series.items():
        if values and (name.startswith(SUMMARY_PREFIXES) or name in ("cpu_busy", "tool_cpu_top")):
            peaks[name] = max(values)
    cores = [max(v) for n, v in series.items() if n.startswith("cpu_busy:") and v]
    if cores:
        peaks["cpu_busy_core"] = max(cores)
    return {"max": peaks}


def save(run: Run, doc: dict[str, Any]) -> RunTelemetry | None:
    """Store one node's document for ``run`` (replacing an earlier attempt's); None when the
    run was deleted meanwhile."""
    if doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    data, cores = pack(doc)
    fields = {
        "started_at": datetime.fromisoformat(doc["started_at"]),
        "interval_s": float(doc["interval_s"]),
        "samples": len(doc.get("t", [])),
        "data": data,
        "cores": cores,
        "meta": doc.get("meta", {}),
        "summary": summarize(doc.get("series", {})),
    }
    try:
        with transaction.atomic():
            row, _ = RunTelemetry.objects.update_or_create(
                run_id=run.pk, hostname=doc["hostname"], defaults=fields
            )
    except IntegrityError:
        if not Run.objects.filter(pk=run.pk).exists():
            return None
        raise
    refresh_verdict(run)
    return row


VERDICT_FIELDS = ("bottleneck", "bottleneck_evidence", "steady", "collapsed")


def refresh_verdict(run: Run) -> dict[str, Any]:
    """Recompute and store the run's verdict summary (Run.bottleneck, …) from all of its
    nodes' documents: a node's document can arrive after the others', and the verdict is
    over all of them. Called by ``save``; ``manage.py refresh_verdicts`` for older runs."""
    from experiments import bottleneck
    from experiments.run_story import stated_rates

    docs = for_run(run, cores=False)
    found = bottleneck.summary(docs, stated_rates([d["hostname"] for d in docs]))
    values = {
        "bottleneck": found["bottleneck"],
        "bottleneck_evidence": found["evidence"],
        "steady": found["steady"],
        "collapsed": found["collapsed"],
    }
    Run.objects.filter(pk=run.pk).update(**values)
    for name, value in values.items():
        setattr(run, name, value)
    return values


def export(row: RunTelemetry, cores: bool = True) -> dict[str, Any]:
    """The documented form of one row (docs/telemetry.md). ``cores=False`` (a run page)
    leaves the per-core series unread and adds the derived ``cpu_busy_max``."""
    body = unpack(row.data)
    series = body["series"]
    if cores:
        series.update(unpack(row.cores))
    else:
        series.update(body.get("derived", {}))
    doc = {
        "format": FORMAT,
        "hostname": row.hostname,
        "started_at": row.started_at.isoformat(),
        "interval_s": row.interval_s,
        "t": body["t"],
        "series": series,
        "meta": row.meta,
    }
    if body.get("tool"):
        doc["tool"] = body["tool"]
    return doc


def for_run(run: Run, cores: bool = True) -> list[dict[str, Any]]:
    """Every node's document of the run, launcher first then by hostname (``cores``: with
    the per-core series, as exported)."""
    rows = RunTelemetry.objects.filter(run=run)
    rows = list(rows if cores else rows.defer("cores"))
    launcher = run.node.hostname if run.node_id else ""
    rows.sort(key=lambda r: (r.hostname != launcher, r.hostname))
    return [export(r, cores) for r in rows]


@contextmanager
def recording(run: Run, scratch: Path) -> Iterator[None]:
    """Sample this node while the block runs (the executor wraps the measured command in it)
    and store the document, with fio's own logs from ``scratch`` as the tool's series.
    Telemetry never decides a run's outcome: a failure to sample or store is logged only."""
    try:
        sampler: Sampler | None = Sampler(watch_pid=os.getpid()).start()
    except Exception:
        log.exception("run %s: telemetry could not start; the run goes on without it", run.pk)
        sampler = None
    began = time.monotonic()
    try:
        yield
    finally:
        if sampler is not None:
            _store_recording(run, sampler, scratch, began)


def _store_recording(run: Run, sampler: Sampler, scratch: Path, began: float) -> None:
    try:
        doc = sampler.stop()
        if not doc["t"]:
            return  # the tool ended within one reading: nothing worth a row
        if run.tool == "fio":
            tool = read_fio_logs(scratch, round(began - sampler.t0, 3))
            if tool["t"]:
                doc["tool"] = tool
        save(run, doc)
    except Exception:
        log.exception("run %s: its telemetry could not be stored", run.pk)
