"""Finding and storing change points: per configuration and primary metric, over its runs in
the order they started (a run imported later with its own start time takes its place).

The watermark is the run count of each configuration summary (experiments.models.
ConfigSummary.n, kept in the run's own transaction) against the count last analysed
(experiments.models.ChangeScan): ``pending`` lists the summaries that differ, by one indexed
join, so a sweep costs little whatever the history's size; ``analyse`` reads one
configuration's values (the run index by configuration key), runs the detection
(experiments.changes.detection) on its newest ``CHANGES_WINDOW`` runs (more, in overlapping
windows, when more runs arrived at once), explains each change (experiments.changes.explain)
and stores it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings as django_settings
from django.db import IntegrityError, transaction
from django.db.models import F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from experiments.changes import detection, explain
from experiments.comparison.attributes import param_text
from experiments.models import ChangePoint, ChangeScan, ConfigSummary, Metric, Run

log = logging.getLogger(__name__)


def current_settings() -> detection.Settings:
    s = django_settings
    return detection.Settings(
        alpha=s.CHANGES_ALPHA,
        permutations=s.CHANGES_PERMUTATIONS,
        min_size=s.CHANGES_MIN_SIZE,
        seed=s.CHANGES_SEED,
    )


@dataclass(frozen=True)
class Point:
    run_id: int
    value: float
    at: datetime


def series(
    config_key: str, metric: str, newest: int | None = None, uuids: dict | None = None
) -> list[Point]:
    """The configuration's values of ``metric``, one per run (the mean of a run's primary
    rows of that name), in the order the runs started (created, for runs never started);
    ``newest``: only among the configuration's newest runs (a history chart: its metric rows
    are read for those runs alone, whatever the configuration's history); ``uuids``: filled
    with the runs' UUIDs by id (read with them).

    Two indexed reads: the configuration's runs (their key's index), then their metric rows
    (the run index). One join let PostgreSQL walk every primary row of the metric at a
    million runs (2 s instead of ~20 ms)."""
    runs = (
        Run.objects.filter(config_key=config_key)
        .annotate(_at=Coalesce(F("started_at"), F("created")))
        .order_by()
        .values_list("pk", "_at")
    )
    if newest is not None:  # sorted and cut by PostgreSQL: only those rows come back
        runs = runs.order_by("-_at", "-pk")[:newest]
    if uuids is not None:
        at = {}
        for pk, when, uuid in runs.values_list("pk", "_at", "uuid"):
            at[pk] = when
            uuids[pk] = str(uuid)
    else:
        at = dict(runs)
    sums: dict[int, list[float]] = {}
    ids = sorted(at)
    for start in range(0, len(ids), 5000):
        rows = (
            Metric.objects.filter(run_id__in=ids[start : start + 5000], name=metric, primary=True)
            .order_by()  # (the model's order joins the runs)
            .values_list("run_id", "value")
        )
        for run_id, value in rows:
            total = sums.setdefault(run_id, [0.0, 0])
            total[0] += value
            total[1] += 1
    return [
        Point(run_id, total / count, at[run_id])
        for run_id, (total, count) in sorted(sums.items(), key=lambda kv: (at[kv[0]], kv[0]))
    ]


def configuration_text(run: Run) -> str:
    """The alike-runs identity in words: tool, parameters, testbed, target, tuning set,
    data source."""
    params = ", ".join(f"{k}={param_text(v)}" for k, v in sorted((run.params or {}).items()))
    parts = [f"{run.tool} {params}".strip(), f"on {run.testbed.name}"]
    if run.target_id:
        parts.append(f"target {run.target.name}")
    parts.append(f"tuning {run.tuning_set.name}" if run.tuning_set_id else "no tuning set")
    if run.published:
        parts.append(f"published: {run.source or 'study'}")
    return ", ".join(parts)


def _windows(total: int, fresh: int, window: int) -> list[tuple[int, int]]:
    """[start, end) of the windows to analyse: the newest ``window`` runs, or, when more
    than half a window is new, windows of ``window`` overlapping by half from the oldest
    new run's neighbourhood to the end."""
    span = max(window, fresh + window // 2)
    start = max(0, total - span)
    if total - start <= window:
        return [(start, total)]
    out, step = [], window // 2
    while True:
        end = min(start + window, total)
        out.append((start, end))
        if end == total:
            return out
        start += step


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def _similar(a: ChangePoint, before: float, after: float) -> bool:
    """Same direction and a size within a factor of two (relative shifts)."""
    if _sign(a.after_mean - a.before_mean) != _sign(after - before):
        return False
    old = a.shift
    new = after / before - 1.0 if before else None
    if old is None or new is None or old == 0:
        return old == new
    return 0.5 <= new / old <= 2.0


def analyse(config_key: str, metric: str, fresh: int | None = None) -> list[ChangePoint]:
    """Detect, explain and store the change points of one configuration's ``metric``
    (``fresh``: runs not analysed before; None: the whole history). Returns the change
    points created or updated."""
    s = current_settings()
    points = series(config_key, metric)
    total = len(points)
    window = django_settings.CHANGES_WINDOW
    windows = _windows(total, total if fresh is None else fresh, window)
    found: dict[int, detection.Change] = {}
    position = {p.run_id: i for i, p in enumerate(points)}
    existing = list(ChangePoint.objects.filter(config_key=config_key, metric=metric))
    # Stored change points at their run: not permuted again (detection.detect's ``known``).
    stored = {position[c.run_id]: c.p_value for c in existing if c.run_id in position}
    for start, end in windows:
        known = {i - start: p for i, p in stored.items() if start <= i < end}
        for change in detection.detect([p.value for p in points[start:end]], s, known):
            index = start + change.index
            if index not in found or change.p_value < found[index].p_value:
                found[index] = change.__class__(
                    index=index,
                    p_value=change.p_value,
                    q=change.q,
                    before=change.before,
                    after=change.after,
                )
    matched: set[int] = set()
    saved: list[ChangePoint] = []
    bounds = [0, *sorted(found), total]
    for before_start, index, after_end in zip(bounds, bounds[1:], bounds[2:], strict=False):
        change = found[index]
        near = [
            c
            for c in existing
            if c.pk not in matched
            and c.run_id in position
            and abs(position[c.run_id] - index) <= s.min_size
            and _sign(c.after_mean - c.before_mean) == _sign(change.after.mean - change.before.mean)
        ]
        near.sort(key=lambda c: abs(position[c.run_id] - index))
        before_ids = [p.run_id for p in points[before_start:index]]
        after_ids = [p.run_id for p in points[index:after_end]]
        fields = {
            "run_id": points[index].run_id,
            "previous_run_id": points[index - 1].run_id,
            "at": points[index].at,
            "before_mean": change.before.mean,
            "before_n": change.before.n,
            "before_low": change.before.low,
            "before_high": change.before.high,
            "after_mean": change.after.mean,
            "after_n": change.after.n,
            "after_low": change.after.low,
            "after_high": change.after.high,
            "p_value": change.p_value,
            "method": s.method,
            "differences": explain.explain(before_ids, after_ids),
        }
        if near:
            cp = near[0]
            matched.add(cp.pk)
            taken = any(c.pk != cp.pk and c.run_id == fields["run_id"] for c in existing)
            if taken:
                continue
            for name, value in fields.items():
                setattr(cp, name, value)
            cp.save()
            saved.append(cp)
            continue
        if any(c.run_id == fields["run_id"] for c in existing):
            continue
        cp = _create(config_key, metric, fields, existing, position, index, s)
        if cp is not None:
            existing.append(cp)
            matched.add(cp.pk)
            saved.append(cp)
    # A new change nobody has seen, inside the analysed runs but no longer found (the runs
    # since show it was noise): gone.
    lo, hi = windows[0][0] + s.min_size, total - s.min_size
    stale = [
        c.pk
        for c in existing
        if c.pk not in matched
        and c.state == ChangePoint.State.NEW
        and c.announced_at is None
        and c.run_id in position
        and lo <= position[c.run_id] <= hi
    ]
    if stale:
        ChangePoint.objects.filter(pk__in=stale).delete()
    return saved


def _create(config_key, metric, fields, existing, position, index, s) -> ChangePoint | None:
    run = Run.objects.select_related("testbed", "target", "tuning_set").get(pk=fields["run_id"])
    unit = (
        Metric.objects.filter(run_id=run.pk, name=metric, primary=True)
        .values_list("unit", flat=True)
        .first()
        or ""
    )
    cp = ChangePoint(
        config_key=config_key,
        metric=metric,
        unit=unit,
        configuration=configuration_text(run),
        testbed_id=run.testbed_id,
        matrix_id=run.matrix_id,
        tool=run.tool,
        **fields,
    )
    # Known: the lab marked a change like this one (same direction, similar size, about the
    # same run) expected or muted: found again, it is stored as they left it, not as new.
    for known in existing:
        if (
            known.state in ChangePoint.KNOWN
            and _similar(known, fields["before_mean"], fields["after_mean"])
            and (
                known.run_id not in position
                or abs(position[known.run_id] - index) <= 2 * s.min_size
            )
        ):
            cp.state = known.state
            cp.known = known
            cp.state_note = f"known: like change {known.uuid} ({known.state})"
            break
    try:
        with transaction.atomic():
            cp.save()
    except IntegrityError:  # another analysis stored it meanwhile
        return None
    return cp


# The watermark of new headline values: ChangeScan's row of no configuration holds, in ``n``,
# the highest metric row id a sweep has looked at.
_WATERMARK = ("", "")
# Metric ids below the watermark looked at again: rows of transactions that committed after
# a later one (several workers, the ingest's client threads) are not missed.
MARGIN = 20_000


def pending(limit: int | None = None, since: int | None = None):
    """(config_key, metric, summary count, analysed count or None) of the configurations of
    own runs whose run count differs from the count last analysed, among those with headline
    values stored since metric row ``since`` (None: every configuration: a scan of every
    summary). The sweep reads only the new rows (the metric table's primary key) and those
    configurations' summaries: its cost is the new runs', not the history's."""
    scanned = ChangeScan.objects.filter(config_key=OuterRef("config_key"), metric=OuterRef("name"))
    rows = ConfigSummary.objects.filter(pub_n__lt=F("n"))
    if since is not None:
        fresh = (
            Metric.objects.filter(pk__gt=since, primary=True)
            .exclude(run__config_key="")
            .order_by()
            .values_list("run__config_key", "name")
            .distinct()
        )
        pairs = set(fresh)
        if not pairs:
            return []
        rows = rows.filter(config_key__in={k for k, _ in pairs}, name__in={n for _, n in pairs})
    rows = (
        rows.annotate(_scanned=Subquery(scanned.values("n")[:1]))
        .filter(Q(_scanned__isnull=True) | ~Q(_scanned=F("n")))
        .order_by("config_key", "name")
        .values_list("config_key", "name", "n", "_scanned")
    )
    return list(rows[:limit] if limit else rows)


def _watermark() -> int | None:
    return (
        ChangeScan.objects.filter(config_key=_WATERMARK[0], metric=_WATERMARK[1])
        .values_list("n", flat=True)
        .first()
    )


def analyse_pending(limit: int | None = None) -> dict[str, int]:
    """One sweep: every pending configuration and metric (at most ``limit``) analysed and its
    watermark moved. A configuration another process is analysing is left to it. The first
    sweep (no watermark yet) looks at every summary; later ones at the configurations with
    headline values stored since the last (``pending``)."""
    s = current_settings()
    mark = _watermark()
    top = Metric.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    todo = pending(limit, None if mark is None else max(0, mark - MARGIN))
    done = changes = 0
    for key, metric, _n, scanned in todo:
        with transaction.atomic():
            ChangeScan.objects.get_or_create(config_key=key, metric=metric, defaults={"n": 0})
        with transaction.atomic():
            row = (
                ChangeScan.objects.select_for_update(skip_locked=True)
                .filter(config_key=key, metric=metric)
                .first()
            )
            if row is None:
                continue
            count = (
                ConfigSummary.objects.filter(config_key=key, name=metric)
                .values_list("n", flat=True)
                .first()
                or 0
            )
            if count >= 2 * s.min_size:
                fresh = count - (scanned or 0) if scanned is not None and scanned < count else None
                changes += len(analyse(key, metric, fresh))
            row.n = count
            row.save(update_fields=["n", "scanned_at"])
            done += 1
    # Everything up to ``top`` looked at, unless the sweep stopped at its limit.
    if not limit or len(todo) < limit:
        ChangeScan.objects.update_or_create(
            config_key=_WATERMARK[0], metric=_WATERMARK[1], defaults={"n": top}
        )
    return {"analysed": done, "changes": changes}


def rescan(config_key: str | None = None) -> dict[str, int]:
    """Analyse whole histories again (``manage.py detect_changes``): every configuration
    of own runs, or one."""
    summaries = ConfigSummary.objects.filter(pub_n__lt=F("n"))
    if config_key:
        summaries = summaries.filter(config_key=config_key)
    s = current_settings()
    top = Metric.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    done = changes = 0
    for key, metric, n in summaries.order_by("config_key", "name").values_list(
        "config_key", "name", "n"
    ):
        with transaction.atomic():
            if n >= 2 * s.min_size:
                changes += len(analyse(key, metric, None))
            ChangeScan.objects.update_or_create(config_key=key, metric=metric, defaults={"n": n})
        done += 1
    if not config_key and _watermark() is None:
        ChangeScan.objects.create(config_key=_WATERMARK[0], metric=_WATERMARK[1], n=top)
    return {"analysed": done, "changes": changes}
