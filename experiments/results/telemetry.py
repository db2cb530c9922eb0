"""Storing, loading and exporting run telemetry (experiments.models.RunTelemetry).

The document a sampler returns (runners.sampler, format in docs/telemetry.md) is split in
two: ``t``/``series``/``tool`` go into one zlib-compressed JSON blob (the bulk, read only by a
run page or an export), ``meta`` and a small ``summary`` stay plain JSON. ``export`` gives the
document back exactly as documented, so an import (issue 15, item 5) can take the same form.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from experiments.models import Node, Run, RunTelemetry
from experiments.models.runs import update_row
from experiments.results import store as results
from runners.sampler import FORMAT, Sampler, read_fio_logs

log = logging.getLogger(__name__)
HOSTNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}")

# Series whose peaks the summary keeps: what the bottleneck verdict and a filter look at.
SUMMARY_PREFIXES = (
    "disk_util:",
    "net_rx_bw:",
    "net_tx_bw:",
    "ib_rx_bw:",
    "ib_tx_bw:",
    "beegfs_busy_workers:",
)


def _is_core(name: str) -> bool:
    return name.startswith(("cpu_busy:", "cpu_iowait:", "cpu_steal:"))


def _compress(body: dict[str, Any]) -> bytes:
    return zlib.compress(json.dumps(body, separators=(",", ":")).encode(), 6)


def pack(doc: dict[str, Any]) -> tuple[bytes, bytes]:
    """(data, cores): the node-wide series, the tool's series and ``cpu_busy_max`` (the
    busiest core per sample, derived here) in one blob; the per-core series in another.
    A run page reads the first only: per-core series are half of a large node's values and
    only an export needs them."""
    body, cores = _split(doc)
    return _compress(body), _compress(cores) if cores else b""


def _split(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
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
    return body, cores


def page_form(doc: dict[str, Any]) -> dict[str, Any]:
    """What ``export(row, cores=False)`` gives back for the row that stores ``doc``, without
    the row: the verdict of a run whose only document is ``doc`` is computed from it."""
    body, _ = _split(doc)
    out = {
        key: doc[key] for key in ("format", "hostname", "started_at", "interval_s") if key in doc
    }
    out.update(
        t=body["t"], series={**body["series"], **body.get("derived", {})}, meta=doc.get("meta", {})
    )
    if body.get("tool"):
        out["tool"] = body["tool"]
    return out


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


# What an imported or pushed run's telemetry may hold (validate): documents per run, samples
# per document, values over all documents. A 5-node, 10-minute run of a 32-core node with 12
# disks and 4 links is ~5 x 181 x 600 = 543,000 values; the bulk request's byte limit is
# usually the tighter bound.
MAX_DOCUMENTS = 64
MAX_SAMPLES = 86_400  # one day at 1 Hz
MAX_VALUES = 2_000_000
MAX_META_BYTES = 64 * 1024
# DESIGN.md's telemetry vocabulary: node series (with or without ``:<entity>``) and the
# tool's own series (metric names).
NODE_SERIES = frozenset(
    {
        "cpu_busy",
        "cpu_iowait",
        "cpu_steal",
        "mem_used",
        "page_cache",
        "disk_read_bw",
        "disk_write_bw",
        "disk_read_iops",
        "disk_write_iops",
        "disk_util",
        "disk_queue",
        "net_rx_bw",
        "net_tx_bw",
        "ib_rx_bw",
        "ib_tx_bw",
        "tool_cpu",
        "tool_cpu_top",
        "tool_cpu_wait",
        # A BeeGFS daemon's own statistics, ``:storage`` or ``:meta`` (runners.beegfs_stats).
        "beegfs_write_bw",
        "beegfs_read_bw",
        "beegfs_reqs",
        "beegfs_queue",
        "beegfs_busy_workers",
    }
)
TOOL_SERIES = frozenset(
    f"{op}_{kind}" for op in ("write", "read") for kind in ("bw", "iops", "lat")
)
DOC_FIELDS = {"format", "hostname", "started_at", "interval_s", "t", "series", "meta", "tool"}


class TelemetryInvalid(ValueError):
    """An imported document is not beeweb-telemetry/1 as docs/telemetry.md describes."""


def _finite(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and abs(value) < 1e300
    )


def _times(t: Any, where: str) -> list[float]:
    if not isinstance(t, list) or not t:
        raise TelemetryInvalid(f"{where}: a non-empty list of seconds")
    if len(t) > MAX_SAMPLES:
        raise TelemetryInvalid(f"{where}: at most {MAX_SAMPLES} samples")
    previous = -math.inf
    for i, value in enumerate(t):
        if not _finite(value) or value < 0:
            raise TelemetryInvalid(f"{where}[{i}]: a finite number of seconds >= 0")
        if value <= previous:
            raise TelemetryInvalid(f"{where}[{i}]: times must increase ({value} after {previous})")
        previous = value
    return t


def _series(series: Any, n: int, names: frozenset, entities: bool, where: str) -> int:
    """Check each series' name and values; returns how many values they hold."""
    if not isinstance(series, dict):
        raise TelemetryInvalid(f"{where}: an object of series")
    total = 0
    for name, values in series.items():
        base, sep, entity = str(name).partition(":")
        if base not in names or (sep and not entities):
            raise TelemetryInvalid(
                f"{where}: {str(name)[:80]!r} is not a series of DESIGN.md's telemetry vocabulary"
            )
        if sep and (not entity or len(entity) > 100 or not entity.isprintable() or " " in entity):
            raise TelemetryInvalid(f"{where}: {str(name)[:80]!r}: a bad entity name")
        if not isinstance(values, list) or len(values) != n:
            raise TelemetryInvalid(f"{where}.{name}: a list of {n} numbers (one per time)")
        if not all(_finite(v) for v in values):
            raise TelemetryInvalid(f"{where}.{name}: finite numbers only")
        total += n
    return total


def validate(value: Any) -> list[dict[str, Any]]:
    """The documents of an imported or pushed run (a list of beeweb-telemetry/1 documents),
    checked strictly before anything is stored: known fields, one document per hostname, a
    timezone-aware ``started_at``, increasing finite times, series of the documented
    vocabulary with one finite number per time, and the size bounds above. Raises
    TelemetryInvalid saying what and where."""
    from experiments.shared.input_checks import json_problem

    if not isinstance(value, list):
        raise TelemetryInvalid("a list of beeweb-telemetry/1 documents, one per node")
    if len(value) > MAX_DOCUMENTS:
        raise TelemetryInvalid(f"at most {MAX_DOCUMENTS} documents (nodes) per run")
    hosts: set[str] = set()
    total = 0
    for i, doc in enumerate(value):
        where = f"telemetry[{i}]"
        if not isinstance(doc, dict):
            raise TelemetryInvalid(f"{where}: a JSON object")
        unknown = set(doc) - DOC_FIELDS
        if unknown:
            raise TelemetryInvalid(f"{where}: unknown fields {', '.join(sorted(unknown))[:200]}")
        if doc.get("format") != FORMAT:
            raise TelemetryInvalid(f"{where}.format: must be {FORMAT!r}")
        host = doc.get("hostname")
        if not isinstance(host, str) or not HOSTNAME.fullmatch(host):
            raise TelemetryInvalid(f"{where}.hostname: a host name (letters, digits, . - _)")
        if host in hosts:
            raise TelemetryInvalid(f"{where}.hostname: {host!r} has two documents")
        hosts.add(host)
        try:
            started = datetime.fromisoformat(doc.get("started_at"))
        except (TypeError, ValueError):
            started = None
        if started is None or started.tzinfo is None:
            raise TelemetryInvalid(f"{where}.started_at: an ISO 8601 time with its UTC offset")
        interval = doc.get("interval_s")
        if not _finite(interval) or not 0 < interval <= 3600:
            raise TelemetryInvalid(f"{where}.interval_s: seconds, above 0 and at most 3600")
        n = len(_times(doc.get("t"), f"{where}.t"))
        total += _series(doc.get("series"), n, NODE_SERIES, True, f"{where}.series")
        meta = doc.get("meta", {})
        if not isinstance(meta, dict):
            raise TelemetryInvalid(f"{where}.meta: an object")
        problem = json_problem(meta, max_depth=10, where=f"{where}.meta")
        if problem:
            raise TelemetryInvalid(problem)
        if len(json.dumps(meta)) > MAX_META_BYTES:
            raise TelemetryInvalid(f"{where}.meta: at most {MAX_META_BYTES} bytes")
        tool = doc.get("tool")
        if tool is not None:
            if not isinstance(tool, dict) or set(tool) - {"t", "series"}:
                raise TelemetryInvalid(f"{where}.tool: an object of t and series")
            m = len(_times(tool.get("t"), f"{where}.tool.t"))
            total += _series(tool.get("series"), m, TOOL_SERIES, False, f"{where}.tool.series")
        if total > MAX_VALUES:
            raise TelemetryInvalid(f"at most {MAX_VALUES} values over all documents")
    return value


def store(run: Run, docs: list[dict[str, Any]]) -> None:
    """Store validated documents of one run (an import) and its verdict once."""
    for doc in docs:
        save(run, doc, refresh=False)
    if docs:
        refresh_verdict(run)


def save(
    run: Run,
    doc: dict[str, Any],
    refresh: bool = True,
    alone: bool = False,
    first: bool = False,
    verdict: dict[str, Any] | None = None,
    savepoint: bool = True,
) -> RunTelemetry | None:
    """Store one node's document for ``run`` (replacing an earlier attempt's); None when the
    run was deleted meanwhile. ``refresh``: recompute the run's verdict (``store`` does it
    once for several documents); ``alone``: from this document only, without reading the
    rows back (the run has no other node's); ``first``: the run's first attempt, which has
    no earlier row to replace (one INSERT). ``verdict``: receives the verdict's fields,
    once the row is stored, instead of their own UPDATE: the caller writes them with its
    update of the run in this transaction (the executor, with the raw output).
    ``savepoint``: False, no savepoint of its own in the caller's transaction, whose caller
    then undoes the whole transaction on an error (the executor, ``save_deferred``); a run
    deleted meanwhile then raises IntegrityError instead of returning None."""
    fields = _row_fields(doc)
    try:
        # The row and the verdict in one transaction (a savepoint in the caller's).
        with transaction.atomic(savepoint=savepoint):
            # An earlier attempt's row is replaced; usually there is none (one INSERT).
            rows = (
                None
                if first
                else RunTelemetry.objects.filter(run_id=run.pk, hostname=doc["hostname"])
            )
            if rows is not None and rows.update(**fields):
                row = rows.get()
            else:
                row = RunTelemetry(run_id=run.pk, hostname=doc["hostname"], **fields)
                # One plain INSERT … RETURNING id (what create() does, without compiling it).
                results.insert(RunTelemetry, [row])
                row._state.adding, row._state.db = False, RunTelemetry.objects.db
            values = None
            if refresh:
                docs = [page_form(doc)] if alone else None
                values = refresh_verdict(run, docs, write=verdict is None)
    except IntegrityError:
        if savepoint and not Run.objects.filter(pk=run.pk).exists():
            return None
        raise
    if verdict is not None and values:
        verdict.update(values)  # the row is stored (its savepoint released)
    return row


def _row_fields(doc: dict[str, Any]) -> dict[str, Any]:
    """The columns of the row that stores ``doc`` (but its run and hostname)."""
    if doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    data, cores = pack(doc)
    return {
        "started_at": datetime.fromisoformat(doc["started_at"]),
        "interval_s": float(doc["interval_s"]),
        "samples": len(doc.get("t", [])),
        "data": data,
        "cores": cores,
        "meta": doc.get("meta", {}),
        "summary": summarize(doc.get("series", {})),
    }


def unsaved(run: Run, doc: dict[str, Any]) -> tuple[RunTelemetry, dict[str, Any]]:
    """What ``save(run, doc, alone=True, first=True, verdict=…)`` would store, without
    storing anything: the row (unsaved) and the run's verdict fields, computed from ``doc``
    alone (the run has no other node's document). The executor writes both with the run's
    raw output in one statement (``experiments.execution.execute._finish``)."""
    row = RunTelemetry(run_id=run.pk, hostname=doc["hostname"], **_row_fields(doc))
    return row, refresh_verdict(run, [page_form(doc)], write=False)


CLOCK_PROBES = 3


def clock_offset(probes: int = CLOCK_PROBES) -> dict[str, Any] | None:
    """This node's clock against the database server's, which every node of a run reaches:
    ``offset_s`` = the server's clock minus ours at the middle of the round trip of the
    probe that waited least (``rtt_s``, its round trip: the offset is known to ± half of
    it). Two nodes' offsets give their clocks' difference (experiments.shared.bottleneck
    .align_clocks). None where the database is not PostgreSQL (SQLite shares our clock)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    best: tuple[float, float] | None = None
    with connection.cursor() as cursor:
        for _ in range(probes):
            before = time.time()
            cursor.execute("SELECT extract(epoch FROM clock_timestamp())")
            server = float(cursor.fetchone()[0])
            after = time.time()
            rtt = after - before
            if best is None or rtt < best[1]:
                best = (server - (before + after) / 2, rtt)
    offset, rtt = best
    return {"offset_s": round(offset, 4), "rtt_s": round(rtt, 4), "against": "database"}


# A clock measurement is reused by this worker process for at most this long (seconds): a
# node's clock drifts by microseconds a minute against the database server's, while three
# round trips per run are a large part of a short run's cost. The document records the
# reused measurement's age (``meta.clock.age_s``).
CLOCK_MAX_AGE_S = 60.0
_clock_cache: dict[tuple[str, int], tuple[float, dict[str, Any], float]] = {}
# A step of this node's wall clock (against its monotonic clock) larger than this since the
# last measurement makes the next one measure again, whatever its age.
CLOCK_STEP_S = 0.5


def _wall_minus_monotonic() -> float:
    return time.time() - time.monotonic()


_clock_lock = threading.Lock()


def _database_identity() -> str:
    from django.db import connection

    settings = connection.settings_dict
    return f"{settings.get('HOST')}:{settings.get('PORT')}/{settings.get('NAME')}"


def recent_clock_offset(max_age_s: float | None = None) -> dict[str, Any] | None:
    """``clock_offset()``, measured again only when this process's last measurement against
    the same database server is older than ``max_age_s`` (default CLOCK_MAX_AGE_S) or this
    node's wall clock stepped since (by more than CLOCK_STEP_S against its monotonic clock:
    a ``date -s``, an NTP step); the result carries ``age_s``, the seconds since it was
    measured (0 when just measured)."""
    max_age = CLOCK_MAX_AGE_S if max_age_s is None else max_age_s
    key = (_database_identity(), os.getpid())
    now = time.monotonic()
    with _clock_lock:
        cached = _clock_cache.get(key)
    if (
        cached is not None
        and now - cached[0] <= max_age
        and abs(_wall_minus_monotonic() - cached[2]) <= CLOCK_STEP_S
    ):
        return {**cached[1], "age_s": round(now - cached[0], 3)}
    clock = clock_offset()
    if clock is None:
        return None
    with _clock_lock:
        _clock_cache[key] = (time.monotonic(), clock, _wall_minus_monotonic())
    return {**clock, "age_s": 0.0}


def with_clock(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with this node's clock measurement in ``meta.clock`` (one at most
    CLOCK_MAX_AGE_S old, its age in ``age_s``); a failure to measure leaves it out (the run
    page then says the clock was not checked)."""
    try:
        clock = recent_clock_offset()
    except Exception:
        log.exception("telemetry: the clock of %s could not be measured", doc.get("hostname"))
        clock = None
    if clock is not None:
        doc.setdefault("meta", {})["clock"] = clock
    return doc


# The stated NIC rates of a run's nodes (inventory, not the run's) are reused by the
# executor's verdict of a run alone on its node for at most this long (seconds).
RATES_MAX_AGE_S = 60.0
_rates_cache: dict[tuple[str, ...], tuple[float, dict[str, float]]] = {}


def recent_stated_rates(hostnames: list[str], max_age_s: float | None = None) -> dict[str, float]:
    """``stated_rates(hostnames)`` read again only when this process's last reading of the
    same nodes is older than ``max_age_s`` (default RATES_MAX_AGE_S)."""
    max_age = RATES_MAX_AGE_S if max_age_s is None else max_age_s
    key = tuple(sorted(set(hostnames)))
    cached = _rates_cache.get(key)
    now = time.monotonic()
    if cached is not None and now - cached[0] <= max_age:
        return dict(cached[1])
    rates = stated_rates(list(key))
    _rates_cache[key] = (now, rates)
    return dict(rates)


def stated_rates(hostnames: list[str]) -> dict[str, float]:
    """Hostname -> fastest NIC rate (bytes/s) its hardware profile states."""
    rates: dict[str, float] = {}
    # One query (the executor asks after every run): the fastest NIC per node.
    fastest = (
        Node.objects.filter(hostname__in=hostnames, profile__nics__isnull=False)
        .values("hostname")
        .annotate(gbps=Max("profile__nics__rate_gbps"))
        .values_list("hostname", "gbps")
    )
    for hostname, gbps in fastest:
        rate = gbps * 1e9 / 8
        rates[hostname] = max(rates.get(hostname, 0.0), rate)  # two nodes of one name
    return rates


def refresh_verdict(
    run: Run, docs: list[dict[str, Any]] | None = None, write: bool = True
) -> dict[str, Any]:
    """Recompute and store the run's verdict summary (Run.bottleneck, …) from all of its
    nodes' documents: a node's document can arrive after the others', and the verdict is
    over all of them. Called by ``save``; ``manage.py refresh_verdicts`` for older runs.
    ``write=False``: only computed (the caller writes it with its own update of the run)."""
    from experiments.shared import bottleneck

    # The executor's run alone on its node (``docs`` in hand): its node's stated rates may
    # be a recent reading (RATES_MAX_AGE_S); every other caller reads them now.
    rates = recent_stated_rates if docs is not None else stated_rates
    if docs is None:
        docs = for_run(run, cores=False)
    docs, _ = bottleneck.align_clocks(docs)
    found = bottleneck.summary(docs, rates([d["hostname"] for d in docs]))
    values = {
        "bottleneck": found["bottleneck"],
        "bottleneck_evidence": found["evidence"],
        "steady": found["steady"],
        "collapsed": found["collapsed"],
    }
    for op in ("write", "read"):
        entry = found["steady"].get(f"{op}_bw", {})
        values[f"{op}_steady"] = entry.get("steady")
        values[f"{op}_whole"] = entry["whole"] if "steady" in entry else None
    if write:
        # One plain UPDATE that keeps RunQuerySet.update's summaries rule (the verdict
        # columns are summarised).
        update_row(run.pk, values)
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
def recording(
    run: Run,
    scratch: Path,
    watch_pid: int | None = None,
    keep: Callable[[dict[str, Any]], None] | None = None,
    lazy: bool = False,
) -> Iterator[Callable[[], None]]:
    """Sample this node while the block runs (the executor wraps the measured command in it)
    and store the document, with fio's own logs from ``scratch`` as the tool's series;
    ``watch_pid``: the process whose new descendants are the tool's (default: this one).
    ``keep``: given the document instead, which is not stored here: the executor keeps it
    (on its attempt) for ``save_deferred``, to store it in the transaction that stores the
    run's raw output (one durable commit, not two). A block shorter than the sampling
    interval still gets its two readings, at start and end. ``lazy``: the sampling thread
    starts when the block calls what this yields (the executor: once the tool outlasts its
    first wait), so a run of a few milliseconds starts no thread.
    Telemetry never decides a run's outcome: a failure to sample or store is logged only."""
    try:
        sampler: Sampler | None = Sampler(watch_pid=watch_pid or os.getpid())
        sampler.start(thread=not lazy)
    except Exception:
        log.exception("run %s: telemetry could not start; the run goes on without it", run.pk)
        sampler = None
    began = time.monotonic()
    try:
        yield sampler.keep_sampling if sampler is not None else _nothing
    finally:
        if sampler is not None:
            doc = _document(run, sampler, scratch, began)
            if doc is not None and keep is not None:
                keep(doc)
            elif doc is not None:
                _save_logged(run, doc)


def _nothing() -> None:
    pass


def save_deferred(
    run: Run,
    doc: dict[str, Any] | None,
    alone: bool = False,
    first: bool = False,
    verdict: dict[str, Any] | None = None,
    savepoint: bool = True,
) -> None:
    """Store ``doc``, the document ``recording`` handed to its ``keep`` (nothing when None),
    inside a savepoint of the caller's transaction: a failure is logged and undone alone
    (``verdict`` then stays empty). ``alone``, ``first``, ``verdict``: as for ``save``.
    ``savepoint`` False: no savepoint, and a failure raises (the caller undoes its
    transaction and stores the rest again without the document: the executor)."""
    if doc is None:
        return
    if not savepoint:
        save(run, with_clock(doc), alone=alone, first=first, verdict=verdict, savepoint=False)
        return
    _save_logged(run, doc, alone=alone, first=first, verdict=verdict)


def _document(run: Run, sampler: Sampler, scratch: Path, began: float) -> dict[str, Any] | None:
    try:
        doc = sampler.stop()
        if not doc["t"]:
            return None  # no reading at all (the sampler failed at its start)
        if run.tool == "fio":
            # By fio's own clock (its logs in Unix ms) from the sampler's first reading, so
            # fio's start-up and file layout do not shift its series against the node's;
            # older logs (ms from fio's job start) from when the block began.
            tool = read_fio_logs(
                scratch,
                round(began - sampler.t0, 3),
                started_at=datetime.fromisoformat(doc["started_at"]).timestamp(),
            )
            if tool["t"]:
                doc["tool"] = tool
        # The first reading's time on this node's wall clock as it reads now (the sampler
        # took it from the wall clock then): a step of that clock during the run is then
        # undone with the rest of its error by the offset measured as the document is
        # stored (``with_clock``), which is a reading of the clock as it is now.
        doc["started_at"] = (
            datetime.now(UTC) - timedelta(seconds=time.monotonic() - sampler.t0)
        ).isoformat()
        return doc
    except Exception:
        log.exception("run %s: its telemetry could not be read", run.pk)
        return None


def _save_logged(run: Run, doc: dict[str, Any], **how: Any) -> None:
    try:
        save(run, with_clock(doc), **how)
    except Exception:
        log.exception("run %s: its telemetry could not be stored", run.pk)
