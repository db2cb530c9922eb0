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


def pack(doc: dict[str, Any]) -> bytes:
    body = {"t": doc.get("t", []), "series": doc.get("series", {})}
    if doc.get("tool"):
        body["tool"] = doc["tool"]
    return zlib.compress(json.dumps(body, separators=(",", ":")).encode(), 6)


def unpack(blob: bytes | memoryview) -> dict[str, Any]:
    return json.loads(zlib.decompress(bytes(blob)))


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
    fields = {
        "started_at": datetime.fromisoformat(doc["started_at"]),
        "interval_s": float(doc["interval_s"]),
        "samples": len(doc.get("t", [])),
        "data": pack(doc),
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
    return row


def export(row: RunTelemetry) -> dict[str, Any]:
    """The documented form of one row (docs/telemetry.md)."""
    body = unpack(row.data)
    doc = {
        "format": FORMAT,
        "hostname": row.hostname,
        "started_at": row.started_at.isoformat(),
        "interval_s": row.interval_s,
        "t": body["t"],
        "series": body["series"],
        "meta": row.meta,
    }
    if body.get("tool"):
        doc["tool"] = body["tool"]
    return doc


def for_run(run: Run) -> list[dict[str, Any]]:
    """Every node's document of the run, launcher first then by hostname."""
    rows = list(RunTelemetry.objects.filter(run=run))
    launcher = run.node.hostname if run.node_id else ""
    rows.sort(key=lambda r: (r.hostname != launcher, r.hostname))
    return [export(r) for r in rows]


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
            try:
                doc = sampler.stop()
                if run.tool == "fio":
                    offset = round(began - sampler.t0, 3)
                    tool = read_fio_logs(scratch, offset)
                    if tool["t"]:
                        doc["tool"] = tool
                save(run, doc)
            except Exception:
                log.exception("run %s: its telemetry could not be stored", run.pk)
