"""Storing parsed results: metrics of a run, and which one is each metric's headline value."""

from __future__ import annotations

from collections.abc import Iterable

from experiments.models import Metric, Run

# Metric.extra keys that mark a detail (one job, one target, one table cell), never the run's
# headline value.
DETAIL_KEYS = {
    "job",
    "target",
    "per_process",
    "file_size",
    "record_size",
    "host",
    "service",
    "interval",
    "client",
}
PRIMARY_STAT_ORDER = ("value", "mean", "max")


def mark_primary(metrics: list[Metric]) -> list[Metric]:
    """Set ``primary`` on one metric per name: iteration None, no detail keys, and the first
    of stat value / mean / max that exists."""
    best: dict[str, Metric] = {}
    for metric in metrics:
        metric.primary = False
        if metric.iteration is not None or DETAIL_KEYS & set(metric.extra or {}):
            continue
        if metric.stat not in PRIMARY_STAT_ORDER:
            continue
        current = best.get(metric.name)
        rank = PRIMARY_STAT_ORDER.index(metric.stat)
        if current is None or rank < PRIMARY_STAT_ORDER.index(current.stat):
            best[metric.name] = metric
    for metric in best.values():
        metric.primary = True
    return metrics


def replace_metrics(run: Run, metrics: Iterable[dict]) -> list[Metric]:
    """Replace a run's metrics by ``metrics`` (dicts shaped like ParseResult.to_dict()'s)."""
    rows = [
        Metric(
            run=run,
            name=m["name"],
            value=m["value"],
            unit=m["unit"],
            stat=m.get("stat", "value"),
            iteration=m.get("iteration"),
            extra=m.get("extra") or {},
            source_ref=m.get("source_ref", ""),
        )
        for m in metrics
    ]
    mark_primary(rows)
    run.metrics.all().delete()
    return Metric.objects.bulk_create(rows, batch_size=1000)
