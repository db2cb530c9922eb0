"""The run page's story: the tool's throughput and every node's telemetry on one time axis,
the latency percentiles, and the bottleneck verdict beside the theoretical limit.

One plotly figure with a panel per quantity and node, every panel's x axis ``matches`` the
first: zooming or panning one panel moves all of them (linked zoom), and each panel keeps its
own tick labels. Time is in seconds from the earliest node's first reading, so nodes whose
samplers started at different moments line up by their wall clocks.
"""

from __future__ import annotations

import json
from typing import Any

from django.utils.safestring import mark_safe

from experiments.comparison.charts import PALETTE
from experiments.comparison.latency_sweep import log_ticks
from experiments.inventory import limits
from experiments.models import Run
from experiments.results import telemetry as stored
from experiments.shared import bottleneck
from runners import metrics
from runners.parsers import ParseError, parse

PANEL_HEIGHT = 170  # px per panel
GAP = 0.04  # of the figure's height between panels
PHASE_COLOURS = {"write": "rgba(214,39,40,0.08)", "read": "rgba(31,119,180,0.08)"}
# Latency statistics the page shows, as fio's clat percentiles give them (runners.parsers.fio).
LATENCY_STATS = ("p50", "p99", "p99.9")


def _round(values: list, scale: float, digits: int = 3) -> list:
    return [None if v is None else round(v / scale, digits) for v in values]


def _pct(values: list) -> list[int]:
    """Fractions as whole percent: what a chart can show, and ints keep the page small."""
    return [int(v * 100 + 0.5) for v in values]


def _mb(values: list) -> list:
    """B/s as MB/s: whole above 100, one decimal below."""
    return [int(v / 1e6 + 0.5) if v >= 1e8 else round(v / 1e6, 1) for v in values]


def _visible(series: list[tuple[str, str, list]]) -> list[tuple[str, str, list]]:
    """Leave out lines that stay under 1 % of the panel's peak (a disk's reads during a
    write phase): they add bytes to the page and nothing to the story. Picked on the raw
    values, before any is converted."""
    peaks = [max(y, default=0) for _, _, y in series]
    top = max(peaks, default=0)
    return [
        (name, x, _mb(y))
        for (name, x, y), peak in zip(series, peaks, strict=True)
        if peak > 0 and peak >= 0.01 * top
    ]


def _panels(docs: list[dict], xs: dict[str, list]) -> list[dict[str, Any]]:
    """Panels in order: the tool's throughput (and latency), then per node CPU, disk
    utilisation, disk throughput, network throughput, its BeeGFS daemons, memory. Each: title,
    y title, traces (name, key of its time array in ``xs``, values)."""
    origin = bottleneck._origin(docs)
    panels: list[dict[str, Any]] = []
    tool_traces, lat_traces, rate_traces = [], [], []
    for doc in docs:
        tool = doc.get("tool") or {}
        if not tool.get("t"):
            continue
        x = f"tool{len(xs)}"
        xs[x] = [round(bottleneck.shift(doc, origin) + t, 3) for t in tool["t"]]
        for name, values in tool["series"].items():
            if name.endswith("_bw"):
                tool_traces.append((f"{name} ({doc['hostname']})", x, _round(values, 1e9)))
            elif name.endswith("_lat"):
                lat_traces.append((f"{name} ({doc['hostname']})", x, _round(values, 1e-3)))
            elif not name.endswith("_iops") and metrics.unit(name) == "op/s":
                # metadata operations (mdtest's phases): op/s, whole numbers
                label = f"{metrics.label(name)} ({doc['hostname']})"
                rate_traces.append((label, x, _round(values, 1, 0)))
    if tool_traces:
        panels.append({"title": "Tool throughput", "y": "GB/s", "traces": tool_traces})
    if lat_traces:
        panels.append({"title": "Tool completion latency", "y": "ms", "traces": lat_traces})
    if rate_traces:
        panels.append({"title": "Tool metadata rate", "y": "op/s", "traces": rate_traces})
    for doc in docs:
        if not doc.get("t"):
            continue  # the tool's series only (a run without telemetry)
        host = doc["hostname"]
        shift = bottleneck.shift(doc, origin)
        x = f"n{len(xs)}"  # one time array per node, shared by its traces (see figure())
        xs[x] = [round(shift + t, 3) for t in doc.get("t", [])]
        s = doc.get("series", {})
        cpu = []
        if "cpu_busy" in s:
            cpu.append(("all cores busy", x, _pct(s["cpu_busy"])))
        top = bottleneck.busiest_core(s)
        if top:
            cpu.append(("busiest core", x, _pct(top)))
        if "cpu_iowait" in s:
            cpu.append(("iowait", x, _pct(s["cpu_iowait"])))
        if any(s.get("cpu_steal") or ()):
            # the verdict counts it as taken: drawn where the hypervisor took any
            cpu.append(("steal", x, _pct(s["cpu_steal"])))
        if "tool_cpu_top" in s:
            comm = doc.get("meta", {}).get("tool_top_comm") or "tool"
            cpu.append((f"{comm} (of one core)", x, _pct(s["tool_cpu_top"])))
            if "tool_cpu_wait" in s:
                cpu.append((f"{comm} waiting for a CPU", x, _pct(s["tool_cpu_wait"])))
        panels.append({"title": f"CPU of {host}", "y": "%", "traces": cpu, "max": 100})
        util = [
            (n.partition(":")[2], x, _pct(v)) for n, v in s.items() if n.startswith("disk_util:")
        ]
        if util:
            panels.append({"title": f"Disk utilisation on {host}", "y": "%", "traces": util})
        disk_bw = []
        for n, v in s.items():
            if n.startswith(("disk_read_bw:", "disk_write_bw:")):
                kind, _, dev = n.partition(":")
                disk_bw.append((f"{dev} {kind[5:-3]}", x, v))
        disk_bw = _visible(disk_bw)
        if disk_bw:
            panels.append({"title": f"Disk throughput on {host}", "y": "MB/s", "traces": disk_bw})
        net = []
        for n, v in s.items():
            if n.startswith(("net_rx_bw:", "net_tx_bw:", "ib_rx_bw:", "ib_tx_bw:")):
                kind, _, nic = n.partition(":")
                net.append((f"{nic} {kind.split('_')[1]}", x, v))
        net = _visible(net)
        if net:
            panels.append({"title": f"Network on {host}", "y": "MB/s", "traces": net})
        panels += _beegfs_panels(doc, x)
        mem = [
            (label, x, _round(s[key], 1e9))
            for key, label in (("mem_used", "used"), ("page_cache", "page cache"))
            if key in s
        ]
        if mem:
            panels.append({"title": f"Memory of {host}", "y": "GB", "traces": mem})
    return panels


def _beegfs_panels(doc: dict, x: str) -> list[dict[str, Any]]:
    """Per BeeGFS daemon the node's sampler watched (runners.beegfs_stats): its disk
    throughput (storage), its requests per second, and its busy workers and queue beside its
    worker count. Drawn even when all zero (an idle daemon is a finding: the load did not reach
    it), unlike a disk's idle lines."""
    host, s = doc["hostname"], doc.get("series", {})
    panels: list[dict[str, Any]] = []
    for service, label in bottleneck.BEEGFS_SERVICES.items():
        busy = s.get(f"beegfs_busy_workers:{service}")
        if busy is None:
            continue
        bw = [
            (f"{kind}", x, _mb(s[f"beegfs_{kind}_bw:{service}"]))
            for kind in ("write", "read")
            if f"beegfs_{kind}_bw:{service}" in s
        ]
        if bw:
            panels.append(
                {"title": f"BeeGFS {label} throughput on {host}", "y": "MB/s", "traces": bw}
            )
        if f"beegfs_reqs:{service}" in s:
            reqs = [("requests", x, s[f"beegfs_reqs:{service}"])]
            panels.append(
                {"title": f"BeeGFS {label} requests on {host}", "y": "op/s", "traces": reqs}
            )
        traces = [("busy workers", x, busy)]
        if f"beegfs_queue:{service}" in s:
            traces.append(("queued requests", x, s[f"beegfs_queue:{service}"]))
        n = bottleneck.beegfs_workers(doc, service)
        if n:
            traces.append((f"workers ({n})", x, [n] * len(busy)))
        panels.append(
            {"title": f"BeeGFS {label} workers on {host}", "y": "threads", "traces": traces}
        )
    return panels


def figure(docs: list[dict], verdicts: list[bottleneck.Verdict]) -> dict[str, Any]:
    """The time-series figure: stacked panels, x axes matched to the first, phases shaded.
    A trace names its time array in ``xs`` (``"x": key``) instead of carrying it: a node's
    50 lines share one array, which halves the page; static/run_story.js puts them back."""
    xs: dict[str, list] = {}
    panels = _panels(docs, xs)
    n = len(panels)
    height = PANEL_HEIGHT * n + 60
    share = (1 - GAP * (n - 1)) / n if n else 1
    layout: dict[str, Any] = {
        "height": height,
        "margin": {"l": 60, "r": 200, "t": 30, "b": 40},
        "hovermode": "x unified",
        "showlegend": True,
        "annotations": [],
        "shapes": [],
    }
    data = []
    for i, panel in enumerate(panels):
        suffix = "" if i == 0 else str(i + 1)
        top = 1 - i * (share + GAP)
        xaxis = {"anchor": f"y{suffix}", "title": {"text": "s"} if i == n - 1 else None}
        if i:
            xaxis["matches"] = "x"
        layout[f"xaxis{suffix}"] = {k: v for k, v in xaxis.items() if v is not None}
        yaxis: dict[str, Any] = {
            "domain": [max(0.0, round(top - share, 4)), round(top, 4)],
            "anchor": f"x{suffix}",
            "title": {"text": panel["y"]},
            "rangemode": "tozero",
        }
        if panel.get("max"):
            yaxis["range"] = [0, panel["max"] * 1.05]
        layout[f"yaxis{suffix}"] = yaxis
        layout["legend" if i == 0 else f"legend{i + 1}"] = {
            "x": 1.01,
            "xanchor": "left",
            "y": round(top, 4),
            "yanchor": "top",
            "font": {"size": 10},
            "tracegroupgap": 0,
        }
        layout["annotations"].append(
            {
                "text": f"<b>{panel['title']}</b>",
                "xref": "paper",
                "yref": "paper",
                "x": 0,
                "y": round(top, 4),
                "xanchor": "left",
                "yanchor": "bottom",
                "showarrow": False,
            }
        )
        for j, (name, x, y) in enumerate(panel["traces"]):
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": name,
                    # A legend per panel, at its right (plotly.js >= 2.22: legend2, …).
                    "legend": "legend" if i == 0 else f"legend{i + 1}",
                    "x": x,
                    "y": y,
                    "xaxis": f"x{suffix}",
                    "yaxis": f"y{suffix}",
                    "line": {"color": PALETTE[j % len(PALETTE)], "width": 1.5},
                    "hovertemplate": f"{name}: %{{y}} {panel['y']}<extra></extra>",
                }
            )
    for v in verdicts:
        if v.phase == "run":
            continue
        layout["shapes"].append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": v.start,
                "x1": v.end,
                "y0": 0,
                "y1": 1,
                "fillcolor": PHASE_COLOURS.get(v.phase, "rgba(0,0,0,0.05)"),
                "line": {"width": 0},
                "layer": "below",
            }
        )
    return {"data": data, "layout": layout, "xs": xs, "panels": [p["title"] for p in panels]}


def latency_figure(run: Run) -> dict[str, Any] | None:
    """p50 / p99 / p99.9 completion latency per direction (fio's clat percentiles)."""
    rows = [
        m
        for m in run.metrics.all()
        if m.name.endswith("_lat")
        and m.stat in LATENCY_STATS
        and m.iteration is None
        # per-job values carry their job in extra; the run's own values do not
        and not (m.extra or {}).get("job")
    ]
    if not rows:
        return None
    data = []
    for j, name in enumerate(sorted({m.name for m in rows})):
        values = {m.stat: m.value for m in rows if m.name == name}
        stats = [s for s in LATENCY_STATS if s in values]
        data.append(
            {
                "type": "bar",
                "name": name,
                "x": stats,
                "y": [round(values[s] * 1e3, 4) for s in stats],
                "marker": {"color": PALETTE[j % len(PALETTE)]},
                "hovertemplate": f"{name} %{{x}}: %{{y}} ms<extra></extra>",
            }
        )
    layout = {
        "height": 280,
        "margin": {"l": 60, "r": 20, "t": 30, "b": 40},
        "barmode": "group",
        # Plotly labels a short log axis's minor ticks with their digit alone ("7 8 9 0.1 2
        # 3"): 1, 2, 5 per decade, each written in full.
        "yaxis": {
            "title": {"text": "ms"},
            "type": "log",
            **log_ticks([y for t in data for y in t["y"] if y]),
        },
        "title": {"text": "Completion latency percentiles"},
    }
    return {"data": data, "layout": layout}


def theoretical_limit(run: Run, op: str) -> dict[str, Any] | None:
    """The lowest limit of what the run measured for ``op`` (write/read), as the comparison
    computes it (experiments.inventory.limits), and the run's primary result as a share of it."""
    if op not in ("write", "read"):
        return None
    scope = limits.run_scope(run.tool, run.params, run.target_id, run.testbed_id)
    found = limits.compute_scope_limits(scope, run.testbed, target=run.target)
    lim = found.bottleneck(op)
    if lim is None:
        return {"missing": found.missing, "notes": found.notes}
    value = getattr(lim, op)
    primary = next((m.value for m in run.metrics.all() if m.primary and m.name == f"{op}_bw"), None)
    # Above the limit (beyond its uncertainty) the data did not come through what the limit
    # bounds: a cache served it. A share of the limit ("3596%") would explain nothing.
    above = primary is not None and limits.above_limit(primary, value)
    return {
        "name": lim.name,
        "detail": lim.detail,
        "gbps": value / 1e9,
        "share": primary / value if primary is not None and value and not above else None,
        "above": above,
        "result_gbps": primary / 1e9 if above else None,
        "notes": found.notes,
    }


def json_script(value: Any, element_id: str) -> str:
    """Django's ``json_script``, minus its cost on a large figure: it escapes with
    ``str.translate`` character by character (2 s for 2 MB); ``str.replace`` does the same
    three replacements in C."""
    text = json.dumps(value, separators=(",", ":"))
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return mark_safe(  # noqa: S308 - JSON with <, > and & escaped cannot leave the element
        f'<script id="{element_id}" type="application/json">{text}</script>'
    )


MIB = 2**20
ELBENCHO_DIRECTIONS = {"WRITE": "write", "MKFILES": "write", "READ": "read"}


def _series_on_axis(points: dict[str, dict[float, float]]) -> dict[str, Any]:
    """{metric: {t: value}} -> {"t", "series"}, null where a metric has no value at a t."""
    times = sorted({t for per in points.values() for t in per})
    return {
        "t": times,
        "series": {name: [per.get(t) for t in times] for name, per in points.items()},
    }


def _elbencho_live(raw: str) -> dict[str, Any] | None:
    """elbencho's live CSV (--livecsv): its Total row per interval, phases one after another."""
    first = raw.lstrip().split("\n", 1)[0]
    if "RuntimeMS" not in first:
        return None
    try:
        result = parse(raw, tool="elbencho")
    except ParseError:
        return None
    points: dict[str, dict[float, float]] = {}
    offset = 0.0
    for phase in result.extra.get("phases", []):
        live = (phase.get("extra") or {}).get("live_series") or []
        direction = ELBENCHO_DIRECTIONS.get(str(phase.get("phase", "")).upper())
        if not live or direction is None:
            continue
        for row in live:
            t = round(offset + row["runtime_s"], 3)
            for key, name, factor in (
                ("mib_s", f"{direction}_bw", MIB),
                ("iops", f"{direction}_iops", 1),
                ("lat_io_us", f"{direction}_lat", 1e-6),
            ):
                if row.get(key) is not None:
                    points.setdefault(name, {})[t] = row[key] * factor
        offset += live[-1]["runtime_s"]
    return _series_on_axis(points) if points else None


def _ior_iterations(run: Run) -> dict[str, Any] | None:
    """IOR's per-iteration bandwidth at the seconds its own phase times add up to (each
    iteration writes, then reads): a plateau per phase. The output leaves out what happens
    between phases (barriers, file removal), so later phases show a little early."""
    rows = [m for m in run.metrics.all() if m.iteration is not None]
    bw = {(m.extra or {}).get("test", 0): {} for m in rows}
    for m in rows:
        if m.name in ("write_bw", "read_bw", "write_time", "read_time") and m.stat == "value":
            bw[(m.extra or {}).get("test", 0)][(m.iteration, m.name)] = m.value
    points: dict[str, dict[float, float]] = {}
    t = 0.0
    for test in sorted(bw):
        values = bw[test]
        for iteration in sorted({i for i, _ in values}):
            for op in ("write", "read"):
                seconds, rate = (
                    values.get((iteration, f"{op}_time")),
                    values.get((iteration, f"{op}_bw")),
                )
                if not seconds or rate is None:
                    continue
                per = points.setdefault(f"{op}_bw", {})
                per[round(t, 3)] = rate
                t += seconds
                per[round(t, 3)] = rate
    return _series_on_axis(points) if points else None


def _mdtest_iterations(run: Run) -> dict[str, Any] | None:
    """mdtest's per-iteration rates (verbose output, ``-v``: "Directory creation: 31.788 sec,
    96.639 ops/sec" per phase and iteration) at the seconds its own phase durations add up
    to, in the order it printed them: a plateau per phase, one series per operation. Phases
    printed as 0.000 s (tree creation) have no span to draw. As for IOR, what happens between
    phases is not printed, so later phases show a little early."""
    rows = sorted(
        (
            m
            for m in run.metrics.all()
            if m.iteration is not None
            and m.stat == "value"
            and metrics.unit(m.name) == "op/s"
            and isinstance((m.extra or {}).get("seconds"), int | float)
        ),
        key=lambda m: (m.iteration, m.pk),
    )
    points: dict[str, dict[float, float]] = {}
    t = 0.0
    for m in rows:
        seconds = m.extra["seconds"]
        if seconds <= 0:
            continue
        per = points.setdefault(m.name, {})
        per[round(t, 3)] = m.value
        t += seconds
        per[round(t, 3)] = m.value
    return _series_on_axis(points) if points else None


def tool_series(run: Run) -> dict[str, Any] | None:
    """The tool's own time series where its output has them (fio's come from its logs with
    the telemetry): elbencho's live CSV, IOR's iterations, mdtest's verbose per-iteration
    phases. IOzone prints no times: its tables are over file and record sizes, not time."""
    if run.tool == "elbencho" and run.raw_output:
        return _elbencho_live(run.raw_output)
    if run.tool == "ior":
        return _ior_iterations(run)
    if run.tool == "mdtest":
        return _mdtest_iterations(run)
    return None


def context(run: Run) -> dict[str, Any]:
    """Template context of the run page's telemetry include; empty without telemetry."""
    docs = stored.for_run(run, cores=False)
    out: dict[str, Any] = {}
    lat = latency_figure(run)
    if lat:
        out["latency_figure"] = json_script(lat, "latency-figure")
    if not any(d.get("tool") for d in docs) and (series := tool_series(run)):
        # On the launcher's time axis when it was sampled (the tool started with its sampler).
        if docs:
            docs[0]["tool"] = series
        else:
            host = run.node.hostname if run.node_id else run.tool
            docs = [{"hostname": host, "started_at": None, "t": [], "series": {}, "tool": series}]
    if not docs:
        return out
    docs, clock_notes = bottleneck.align_clocks(docs)
    verdicts: list[bottleneck.Verdict] = []
    if any(d["t"] for d in docs):
        verdicts = bottleneck.verdicts(docs, stored.stated_rates([d["hostname"] for d in docs]))
        for v in verdicts:
            v.limit = theoretical_limit(run, v.phase)
    out.update(
        {
            "telemetry_docs": docs,
            "verdicts": verdicts,
            "clock_notes": [n for n in clock_notes if n.text],
            "telemetry_figure": json_script(figure(docs, verdicts), "telemetry-figure"),
            "unavailable": {
                # A node that refused sampling has no readings, only its reason.
                d["hostname"]: d.get("meta", {}).get("unavailable", {})
                for d in docs
                if d["t"] or d.get("meta")
            },
        }
    )
    return out
