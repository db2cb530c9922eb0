"""Runs (one execution or one imported/published result) and their metrics in base units."""

from __future__ import annotations

import json
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, models, transaction
from django.db.models import F
from django.db.models.functions import Coalesce, NullIf
from django.dispatch import Signal
from django.urls import reverse

from experiments.models.common import OwnedModel, PublishedModel, published_key_constraint
from experiments.models.inventory import Node, Target, Testbed
from experiments.models.tuning import TuningSet
from experiments.shared import prepared
from experiments.shared.bottleneck import KINDS
from runners import registry

# The tools of runners.registry as choices: ``Tool.values``, ``Tool.choices``, ``Tool.FIO``,
# ``Tool.OTHER``. The fields take ``registry.tool_choices`` (a callable): adding a tool to the
# registry changes no migration.
Tool = models.TextChoices(
    "Tool", [(t.name.upper(), (t.name, t.label)) for t in registry.TOOLS], module=__name__
)


# The run columns a configuration summary reads (experiments.results.summaries): the configuration,
# the data source, the verdict and the steadiness columns. A change of any of them refreshes
# the run's summaries in its transaction.
SUMMARY_KEY_COLUMNS = (
    "tool",
    "testbed_id",
    "target_id",
    "tuning_set_id",
    "params",
    "published",
    "source",
)
SUMMARY_COLUMNS = (
    *SUMMARY_KEY_COLUMNS,
    "bottleneck",
    "collapsed",
    "write_steady",
    "write_whole",
    "read_steady",
    "read_whole",
)
SUMMARY_FIELDS = frozenset(SUMMARY_COLUMNS) | {"testbed", "target", "tuning_set"}

# Sent with ``run_ids`` whenever runs' headline metrics or summarised columns change, inside
# the change's transaction; experiments.results.summaries refreshes their summaries on it (connected
# when the app is ready), so the models never import the module that keeps the summaries.
summaries_stale = Signal()


def refresh_summaries(run_ids) -> None:
    summaries_stale.send(sender=Run, run_ids=run_ids)


# Sent with ``run_ids`` by what ends runs without their worker's hook (the janitor failing or
# cancelling a run for good, a cancel of runs not started or whose worker is gone), after its
# transaction; experiments.matrices.adaptive decides their adaptive cells on it (connected when the
# app is ready), so neither the janitor nor the matrices import the adaptive decisions.
runs_ended = Signal()

# Sent with ``run_ids`` whenever runs with metric rows may have changed whether they are data
# (their status, ``Run.DATA``), inside the change's transaction: experiments.results.store marks
# their headline metrics again (``primary`` only on runs that are data) and refreshes their
# summaries (connected when the app is ready).
data_changed = Signal()


class RunQuerySet(models.QuerySet):
    def visible_to(self, user) -> RunQuerySet:
        """Every signed-in user reads the lab's runs; anonymous visitors read nothing."""
        return self if user.is_authenticated else self.none()

    def update(self, **kwargs) -> int:
        """An update of fields the configuration summaries read (the configuration, the data
        source, the stored verdict) refreshes the summaries of the runs it changes, in its
        transaction (experiments.results.summaries). Runs without a headline metric are in no
        summary (the executor writes a run's verdict before its metrics): nothing to refresh;
        their configuration key is brought up to date when their metrics are stored.

        A status that moves runs with metric rows in or out of the data (``Run.DATA``: a
        succeeded run cancelled, a failed one set to succeeded) marks their headline
        metrics again (``data_changed``), in the same transaction."""
        status = kwargs.get("status")
        if status is not None:
            data = status in Run.DATA
            moved = self.filter(metrics__isnull=False)
            moved = (
                moved.exclude(status__in=Run.DATA) if data else moved.filter(status__in=Run.DATA)
            )
        if not SUMMARY_FIELDS.intersection(kwargs) and status is None:
            return super().update(**kwargs)
        with transaction.atomic(using=self.db):
            ids = []
            if SUMMARY_FIELDS.intersection(kwargs):
                ids = list(
                    self.filter(metrics__primary=True).values_list("pk", flat=True).distinct()
                )
            changed = [] if status is None else list(moved.values_list("pk", flat=True).distinct())
            count = super().update(**kwargs)
            if ids:
                refresh_summaries(run_ids=ids)
            if changed:
                data_changed.send(sender=Run, run_ids=changed)
        return count


class Run(OwnedModel, PublishedModel):
    """One execution of one tool on one testbed with one tuning set.

    Keeps the exact command, the raw output (stored before parsing) and its metrics.
    """

    class Status(models.TextChoices):
        PLANNED = "planned", "planned"
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"
        IMPORTED = "imported", "imported"
        PUBLISHED = "published", "published"

    TERMINAL = {
        Status.SUCCEEDED,
        Status.FAILED,
        Status.CANCELLED,
        Status.IMPORTED,
        Status.PUBLISHED,
    }
    # Runs that finished as measured: only their metrics are data (DESIGN.md). A cancelled,
    # failed (a tool's error, a timeout, an unparseable output) or unfinished run keeps what it
    # measured on its own page, but none of its metrics is ``primary``: no comparison,
    # summary, runs-table value, export or API aggregate counts it.
    DATA = frozenset({Status.SUCCEEDED, Status.IMPORTED, Status.PUBLISHED})

    # No index of its own: exp_run_testbed_created_id (testbed, -created, -id) leads with it
    # (lookups by testbed, the PROTECT check of a testbed's delete); one index fewer to keep
    # per ingested run (issue 17).
    testbed = models.ForeignKey(
        Testbed, on_delete=models.PROTECT, related_name="runs", db_index=False
    )
    tuning_set = models.ForeignKey(
        TuningSet, null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    target = models.ForeignKey(
        Target,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
        help_text="Set when the run measured one target (dd on a device, StorageBench).",
    )
    tool = models.CharField(max_length=registry.MAX_NAME, choices=registry.tool_choices)
    tool_version = models.CharField(max_length=60, blank=True)
    label = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PLANNED)
    command = models.TextField(blank=True, help_text="Command line as the tool printed it.")
    argv = models.JSONField(default=list, blank=True)
    params = models.JSONField(default=dict, blank=True)
    raw_output = models.TextField(blank=True)
    parse_error = models.TextField(blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    notes = models.TextField(blank=True)

    # Execution (runs of a matrix). The Run row exists before its task is queued.
    # No index of its own: exp_run_matrix_status (matrix, status, …) leads with it (a matrix's
    # runs, its delete's cascade).
    matrix = models.ForeignKey(
        "experiments.Matrix",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="runs",
        db_index=False,
    )
    cell_key = models.CharField(
        max_length=64,
        blank=True,
        editable=False,
        help_text="Hash of the cell: parameters, testbed, tuning set.",
    )
    repetition = models.PositiveSmallIntegerField(null=True, blank=True)
    node = models.ForeignKey(
        Node,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
        help_text="Launcher node: its worker's queue runs the tool.",
    )
    launch = models.JSONField(
        default=dict, blank=True, help_text="Launch mode, hosts, timeout, drop caches."
    )
    # Each dispatch carries a fresh token; a delivery whose token is not the run's is stale
    # (a duplicate, or a message the janitor already replaced) and does nothing.
    dispatch_token = models.UUIDField(null=True, blank=True, editable=False)
    queue = models.CharField(max_length=300, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    worker = models.CharField(max_length=255, blank=True)
    pid = models.PositiveIntegerField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    error = models.TextField(blank=True, help_text="Why the execution failed or stopped.")
    effective_config = models.JSONField(
        default=dict, blank=True, help_text="Configuration read from the node before the run."
    )
    queued_at = models.DateTimeField(null=True, blank=True)
    # Exclusive use of nodes (experiments.execution.holding): the hostnames the run holds (or waits
    # for)
    # before its tool starts, and, while it waits, which of them are busy and with what run.
    nodes_held = models.JSONField(
        default=list, blank=True, help_text="Nodes the run holds exclusively while it runs."
    )
    waiting_for = models.TextField(
        blank=True, help_text="While the run waits for its nodes: which, and who holds them."
    )
    # Slurm launch mode (runners.slurm): the job that held the run's client nodes, its state
    # as Slurm last reported it, Slurm's reason, and the nodes it allocated (the run's hosts).
    slurm_job_id = models.CharField("Slurm job id", max_length=20, blank=True)
    slurm_state = models.CharField("Slurm job state", max_length=32, blank=True)
    slurm_reason = models.CharField("Slurm reason", max_length=200, blank=True)
    slurm_nodes = models.JSONField(
        "Slurm nodes", default=list, blank=True, help_text="Nodes Slurm allocated to the run."
    )
    # Idempotency key of a pushed/bulk-ingested run, chosen by the client (a file's hash, a
    # job id): ingesting the same key twice returns the existing run instead of a copy.
    client_key = models.CharField(
        max_length=200,
        null=True,
        blank=True,
        help_text="Client-supplied idempotency key of an ingested run (unique per owner).",
    )
    # The bottleneck verdict and the tool's steadiness (experiments.shared.bottleneck.summary), kept
    # up to date whenever the run's telemetry is stored (experiments.results.telemetry.save) so
    # that a
    # comparison counts and filters verdicts without unpacking any series.
    # Indexed by exp_run_bottleneck (Meta): equality only (db_index=True would add a
    # varchar_pattern_ops copy for LIKE on PostgreSQL, which nothing asks).
    bottleneck = models.CharField(
        max_length=8,
        blank=True,
        help_text=(
            "disk, cpu, network, beegfs (a BeeGFS server's workers), none (latency-bound), "
            "unknown; empty: no telemetry."
        ),
    )
    bottleneck_evidence = models.TextField(blank=True)
    steady = models.JSONField(
        default=dict,
        blank=True,
        help_text="Per direction (write_bw, read_bw): whole-run and steady-state B/s.",
    )
    collapsed = models.BooleanField(
        default=False, help_text="The tool's throughput fell below half its early rate."
    )
    # ``steady``'s numbers a comparison averages, as columns: reading them out of the JSON in
    # the summary query made a comparison of all 100,000 bench runs ~30 % slower.
    write_steady = models.FloatField(null=True, blank=True)
    write_whole = models.FloatField(null=True, blank=True)
    read_steady = models.FloatField(null=True, blank=True)
    read_whole = models.FloatField(null=True, blank=True)
    # The run's configuration (experiments.results.summaries.config_key: tool, parameters, testbed,
    # target, tuning set, data source) as its summaries last saw it; set by those summaries'
    # maintenance only, so a change of the configuration still finds the old one.
    config_key = models.CharField(max_length=32, blank=True, default="", editable=False)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]
        constraints = [
            published_key_constraint(),
            models.UniqueConstraint(
                fields=["matrix", "cell_key", "repetition"],
                condition=models.Q(matrix__isnull=False),
                name="%(app_label)s_%(class)s_unique_matrix_cell_repetition",
            ),
            # Bulk ingest looks runs up by (owner, client_key) before creating them; this
            # unique index serves that lookup and makes a concurrent duplicate fail.
            models.UniqueConstraint(
                fields=["owner", "client_key"],
                condition=models.Q(client_key__isnull=False),
                name="%(app_label)s_%(class)s_unique_owner_client_key",
            ),
        ]
        indexes = [
            # Run list page and GET /api/runs/ (cursor pagination), newest first:
            # ORDER BY created DESC, id DESC LIMIT 50 reads 50 index entries instead of
            # sorting every run (170 ms -> ~1 ms at 100,000 runs).
            models.Index(fields=["-created", "-id"], name="exp_run_created_id"),
            # Run list filtered by testbed, newest first, ties by id (keyset pagination): a
            # page and its bounded count read this index alone; without "-id" the planner
            # preferred filtering the (created, id) index, 10,000 rows for 1,000 at 1M runs.
            # With the configuration key (a testbed's history chart picks its lines from the
            # configurations of the testbed's newest 2,000 runs: an index-only read of 2,000
            # entries instead of a heap page a run; experiments.changes.history).
            models.Index(
                fields=["testbed", "-created", "-id"],
                include=["config_key"],
                name="exp_run_testbed_created_id",
            ),
            # Run list (page and API) filtered by tool, newest first.
            models.Index(fields=["tool", "-created", "-id"], name="exp_run_tool_created"),
            # Janitor: running runs by heartbeat.
            models.Index(fields=["status", "heartbeat_at"], name="exp_run_status_heartbeat"),
            # A matrix's runs: its progress counts by status (an index-only scan), the matrix
            # list's counts of one page of matrices, and the progress table's runs of one
            # status latest finished first (or queued ones in id order) without sorting the
            # matrix's runs (issue 30).
            models.Index(
                fields=["matrix", "status", "finished_at", "id"], name="exp_run_matrix_status"
            ),
            # The matrix preview's duration estimates: the latest succeeded runs of a cell, or
            # of a testbed, with the tool (experiments.matrices.preview). Partial: runs executed
            # here succeed; ingested ones are imported unless their client says otherwise, so
            # bulk ingest (bench/ingest.py) writes neither.
            models.Index(
                fields=["tool", "cell_key", "finished_at"],
                condition=models.Q(status="succeeded"),
                name="exp_run_succeeded_cell",
            ),
            models.Index(
                fields=["tool", "testbed", "finished_at"],
                condition=models.Q(status="succeeded"),
                name="exp_run_succeeded_testbed",
            ),
            # The dashboard's published studies (and whether any are loaded): the published
            # runs alone, a few thousand at most, never the user's million.
            models.Index(
                fields=["source"],
                condition=models.Q(published=True),
                name="exp_run_published_source",
            ),
            # Configuration summaries: the runs of the configurations a change touches; and a
            # configuration's newest runs in the order they started (a history chart's newest
            # points: scan.series, experiments.changes.history) read in order, not sorted.
            models.Index(
                F("config_key"),
                Coalesce("started_at", "created").desc(),
                F("id").desc(),
                name="exp_run_config_start",
            ),
            # Comparison filtered by a stored verdict (run__bottleneck=…).
            models.Index(fields=["bottleneck"], name="exp_run_bottleneck"),
        ]

    def __str__(self) -> str:
        return self.label or f"{self.get_tool_display()} on {self.testbed}"

    @classmethod
    def from_db(cls, db, field_names, values):
        """Remember the loaded values of what the summaries read (see ``save``)."""
        instance = super().from_db(db, field_names, values)
        instance._summarised = instance._summary_values()
        return instance

    @property
    def is_data(self) -> bool:
        """Whether the run finished as measured (``DATA``): its metrics count in comparisons."""
        return self.status in Run.DATA

    def _summary_values(self) -> tuple:
        # Parameters as text: a dict changed in place is still told from the loaded one.
        return tuple(
            json.dumps(value, sort_keys=True, default=str) if isinstance(value, dict) else value
            for value in (self.__dict__.get(f) for f in SUMMARY_COLUMNS)
        )

    def save(self, *args, **kwargs) -> None:
        """A saved change of what the summaries read refreshes them in the same transaction
        (a new run has no metrics, hence no summary, yet)."""
        fields = kwargs.get("update_fields")
        was_data = None  # whether the stored row is data, when the status may change
        if not self._state.adding and (fields is None or "status" in fields):
            stored = Run.objects.filter(pk=self.pk).values_list("config_key", "status").first()
            if stored is not None:
                if fields is None:
                    # The key as the summaries last set it, not as this instance read it.
                    self.config_key = stored[0]
                was_data = stored[1] in Run.DATA
        loaded = getattr(self, "_summarised", None)
        now = self._summary_values()
        fields = kwargs.get("update_fields")
        # Unknown before (an instance not read from the database) counts as changed.
        changed = (loaded != now if loaded is not None else not self._state.adding) and (
            fields is None or bool(SUMMARY_FIELDS.intersection(fields))
        )
        # Moved in or out of the data: its headline metrics are marked again.
        moved = was_data is not None and was_data != self.is_data
        if not changed and not moved:
            super().save(*args, **kwargs)
        else:
            with transaction.atomic():
                super().save(*args, **kwargs)
                if changed:
                    refresh_summaries(run_ids=[self.pk])
                if moved:
                    data_changed.send(sender=Run, run_ids=[self.pk])
        self._summarised = now

    def get_absolute_url(self) -> str:
        return reverse("experiments:run", args=[self.uuid])

    @property
    def beegfs_servers(self) -> list[tuple[str, str]]:
        """Each held server's BeeGFS settings for this run (``effective_config["beegfs"]``,
        experiments.execution.beegfs): (hostname, "outcome; service key before → asked, in
        force …; restarted in … s, Online after … s")."""
        value = (self.effective_config or {}).get("beegfs")
        if not isinstance(value, dict):
            return []
        out = []
        for host, answer in sorted(value.items()):
            answer = answer if isinstance(answer, dict) else {}
            parts = [str(answer.get("outcome", ""))]
            for scope, record in sorted((answer.get("services") or {}).items()):
                for k in record.get("keys", []):
                    before = "default" if k.get("before") is None else k["before"]
                    parts.append(
                        f"{scope}.{k['key']} {before} → {k['asked']}, in force {k['in_force']}"
                    )
                if record.get("restarted"):
                    parts.append(
                        f"{scope} restarted in {record.get('restart_s')} s, Online after "
                        f"{record.get('online_s')} s"
                    )
                elif record.get("keys"):
                    parts.append(f"{scope} already as asked: not restarted")
                if record.get("error"):
                    parts.append(f"{scope}: {record['error']}")
            out.append((str(host), "; ".join(p for p in parts if p)))
        return out

    @property
    def cache_drops(self) -> list[tuple[str, str]]:
        """Each node's cache-drop outcome, by hostname (``effective_config["drop_caches"]``,
        one entry per node the run held: experiments.execution.agent). Runs executed before every
        held
        node dropped its caches stored one text, their launcher's."""
        config = self.effective_config or {}
        value = config.get("drop_caches")
        if isinstance(value, dict):
            return sorted((str(host), str(outcome)) for host, outcome in value.items())
        if value:
            return [(str(config.get("hostname", "")), str(value))]
        return []


class NodeLease(models.Model):
    """One node held exclusively by one attempt of a running run (experiments.execution.holding). A
    lease
    whose run is no longer running, is in another attempt or stopped sending heartbeats
    counts as free."""

    hostname = models.CharField(max_length=253, unique=True)
    node = models.ForeignKey(
        Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="leases")
    attempt = models.PositiveSmallIntegerField()
    acquired_at = models.DateTimeField()
    # Work the run asks of the held node's own worker (its node agent, experiments.execution.agent).
    drop_requested_at = models.DateTimeField(
        null=True, blank=True, help_text="When the run asked this node to drop its caches."
    )
    drop_result = models.TextField(
        blank=True, help_text="The node's answer: dropped, not permitted: ..., refused ..."
    )
    sample_from = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Set while the run's measured command runs: this node's agent samples its "
        "telemetry until it is cleared or the lease goes "
        "(experiments.execution.agent.NodeTelemetry).",
    )
    beegfs_request = models.JSONField(
        null=True,
        blank=True,
        help_text="The BeeGFS service keys the run asks this server to have in force "
        "({scope: {key: value}}, rendered; experiments.execution.beegfs).",
    )
    beegfs_result = models.JSONField(
        null=True, blank=True, help_text="The server's answer: per service, per key, in force."
    )

    def __str__(self) -> str:
        return f"{self.hostname} held by run {self.run_id}"


# The data source of a run that is not from a published study: the ``source`` dimension's
# value (filter ``f=source:own runs``), so own runs never pool with a study unseen.
OWN_RUNS = "own runs"


def source_expression():
    """A published run's study (``Run.source``, "published" when it names none), otherwise
    ``OWN_RUNS``: imported or executed runs are the user's own even if they cite a document."""
    return models.Case(
        models.When(
            run__published=True,
            then=Coalesce(
                NullIf(models.F("run__source"), models.Value("")), models.Value("published")
            ),
        ),
        default=models.Value(OWN_RUNS),
        output_field=models.CharField(),
    )


# The directions of the steadiness columns (``<direction>_steady``, ``<direction>_whole``): a
# metric named ``<direction>_…`` is averaged with them (``_steady``; the bulk ingest's summaries,
# experiments.results.summaries.batch_rows, read the same list).
STEADY_DIRECTIONS = ("write", "read")


def _steady(key: str):
    """The run's ``<direction>_<key>`` column (B/s) for the direction of the metric's name
    (write_*, read_*); NULL for other metrics and runs without the tool's series."""
    return models.Case(
        *(
            models.When(name__startswith=f"{op}_", then=models.F(f"run__{op}_{key}"))
            for op in STEADY_DIRECTIONS
        ),
        default=models.Value(None, output_field=models.FloatField()),
        output_field=models.FloatField(),
    )


class MetricQuerySet(models.QuerySet):
    # Metric rows written or removed through the ORM refresh their runs' configuration
    # summaries in the same transaction (experiments.results.summaries). experiments.results.store
    # and the
    # bulk ingest write metrics with their own single refresh.

    def delete(self):
        with transaction.atomic(using=self.db):
            ids = set(self.filter(primary=True).values_list("run_id", flat=True))
            deleted = super().delete()
            refresh_summaries(run_ids=ids)
        return deleted

    def update(self, **kwargs) -> int:
        with transaction.atomic(using=self.db):
            ids = set(self.values_list("run_id", flat=True))
            count = super().update(**kwargs)
            refresh_summaries(run_ids=ids)
        return count

    def bulk_create(self, objs, *args, **kwargs):
        with transaction.atomic(using=self.db):
            created = super().bulk_create(objs, *args, **kwargs)
            refresh_summaries(run_ids={m.run_id for m in created if m.primary})
        return created

    def primary_values(self) -> MetricQuerySet:
        """Each run's headline number per metric name (see ``Metric.primary``)."""
        return self.filter(primary=True)

    # The comparison builder (experiments.comparison) groups by several dimensions at once
    # and by metric name; ``groups`` maps output names to SQL expressions and ``value`` is
    # the (possibly normalised) value expression. Each method is one query. The grouped rows
    # are a common table expression. The comparison's dimensions are plain columns and
    # per-testbed constants (dimensions.TestbedLookup), cheap to evaluate: PostgreSQL inlines
    # the expression (NOT MATERIALIZED), so it sorts the rows for the grouping in its parallel
    # workers instead of first writing them all to a tuplestore (100,000 rows: ~370 -> ~260
    # ms). Elsewhere (SQLite) the rows stay MATERIALIZED.

    def _grouped_sql(self, groups: dict, value) -> tuple[str, tuple]:
        value = models.F("value") if value is None else value
        one, zero = models.Value(1), models.Value(0)
        inner = (
            self.annotate(_v=value, **groups)
            .values(
                "name",
                *groups,
                "_v",
                _raw=models.F("value"),
                _tb=models.F("run__testbed_id"),
                _tg=models.F("run__target_id"),
                _run=models.F("run_id"),
                # Data source (a study or own runs), published runs, approximate values
                # ("about 5.1 GB/s": extra.approx): a point says when it pools sources.
                _src=source_expression(),
                _pub=models.Case(
                    models.When(run__published=True, then=one),
                    default=zero,
                    output_field=models.IntegerField(),
                ),
                _apx=models.Case(
                    models.When(extra__approx=True, then=one),
                    default=zero,
                    output_field=models.IntegerField(),
                ),
                # The run's stored bottleneck verdict and steadiness (Run.bottleneck): a
                # point counts its runs' verdicts and flags those whose throughput collapsed.
                _bn=models.F("run__bottleneck"),
                _col=models.Case(
                    models.When(run__collapsed=True, then=one),
                    default=zero,
                    output_field=models.IntegerField(),
                ),
                _st=_steady("steady"),
                _wh=_steady("whole"),
            )
            .order_by()
        )
        sql, params = inner.query.sql_with_params()
        materialized = "NOT MATERIALIZED" if connection.vendor == "postgresql" else "MATERIALIZED"
        return f"WITH _g AS {materialized} ({sql}) ", params

    def summary(self, groups: dict, value=None) -> list[dict]:
        """Per group and metric name: n, mean, min, max, median, stddev (PostgreSQL) or sum
        of squares (SQLite, whose STDDEV fails on one-row groups), the raw mean/max in base
        units, the number of runs, and the testbed/target id ranges that tell whether a
        group stands on one testbed or one target; the data source range (``src_lo``,
        ``src_hi``), the number of published runs (``pub_n``) and of approximate values
        (``approx_n``).

        The median is PostgreSQL's PERCENTILE_CONT; elsewhere the mean of the one or two
        middle values, numbered by window functions in the same query."""
        qn = connection.ops.quote_name
        cols = ", ".join(qn(c) for c in ["name", *groups])
        aggregates = [
            "COUNT(_v) AS n",
            "AVG(_v) AS mean",
            "MIN(_v) AS min",
            "MAX(_v) AS max",
            "AVG(_raw) AS raw_mean",
            "MAX(_raw) AS raw_max",
            "MIN(_tb) AS tb_lo",
            "MAX(_tb) AS tb_hi",
            "MIN(_tg) AS tg_lo",
            "MAX(_tg) AS tg_hi",
            "COUNT(_tg) AS tg_n",
            "COUNT(_run) AS runs",
            "MIN(_src) AS src_lo",
            "MAX(_src) AS src_hi",
            "SUM(_pub) AS pub_n",
            "SUM(_apx) AS approx_n",
            *(f"SUM(CASE WHEN _bn = '{kind}' THEN 1 ELSE 0 END) AS bn_{kind}" for kind in KINDS),
            "SUM(_col) AS collapsed_n",
            "AVG(_st) AS steady_mean",
            "AVG(_wh) AS whole_mean",
            "COUNT(_st) AS steady_n",
        ]
        cte, params = self._grouped_sql(groups, value)
        if connection.vendor == "postgresql":
            aggregates += [
                "STDDEV_SAMP(_v) AS stddev",
                "PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY _v) AS median",
            ]
            source = "_g"
        else:
            aggregates += [
                "SUM(_v * _v) AS sum_sq",
                "AVG(CASE WHEN _v IS NOT NULL AND _rn >= _cnt / 2.0 "
                "AND _rn <= _cnt / 2.0 + 1 THEN _v END) AS median",
            ]
            # Values numbered in order within their group (missing values last).
            source = (
                f"(SELECT *, ROW_NUMBER() OVER (PARTITION BY {cols} ORDER BY _v IS NULL, "
                f"_v) AS _rn, COUNT(_v) OVER (PARTITION BY {cols}) AS _cnt FROM _g) _w"
            )
        sql = f"{cte}SELECT {cols}, {', '.join(aggregates)} FROM {source} GROUP BY {cols}"
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            fields = [c[0] for c in cursor.description]
            return [dict(zip(fields, row, strict=True)) for row in cursor.fetchall()]

    def repetitions(self, groups: dict, value=None) -> models.QuerySet:
        """Every run's value with its group (to draw all repetitions as points)."""
        value = models.F("value") if value is None else value
        return (
            self.annotate(_v=value)
            .filter(_v__isnull=False)
            .annotate(**groups)
            .values("name", *groups, "_v")
            .order_by()
        )


class Metric(models.Model):
    """One number of a run in base units (B/s, op/s, s, B), named by DESIGN.md's vocabulary."""

    # Indexed by ``exp_metric_run_name`` (below), which begins with it.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="metrics", db_index=False)
    name = models.CharField(max_length=40)
    value = models.FloatField()
    unit = models.CharField(max_length=8)
    stat = models.CharField(max_length=10, default="value")
    iteration = models.PositiveIntegerField(null=True, blank=True)
    # The run's one headline number for this metric name (iteration null, stat value or else
    # mean, no per-job/per-target detail): what comparisons aggregate over.
    primary = models.BooleanField(default=False)
    extra = models.JSONField(default=dict, blank=True)
    source_ref = models.CharField(max_length=200, blank=True)

    objects = MetricQuerySet.as_manager()

    class Meta:
        ordering = ["run", "name", "stat", "iteration"]
        indexes = [
            # Runs table sorted by a metric (experiments.comparison.runs_table): a page walks the
            # primary
            # values of one metric in order, (value, run) being the keyset; at 100,000 runs
            # ~1 ms instead of a lookup per run and a sort of them all. Also every lookup of
            # one metric's primary rows (Metric.objects.filter(name=…, primary=True): the
            # comparison from metric rows, units, link limits), which had an index of their
            # own, (name, primary, run), until its upkeep was found to cost ~3 ms of
            # PostgreSQL CPU per 500-run bulk request (issue 17).
            models.Index(
                fields=["name", "value", "run"],
                condition=models.Q(primary=True),
                name="exp_metric_primary_value",
            ),
            # A run's metric rows (the foreign key's lookups and cascades), and one metric's
            # value for many runs read from the index alone (``value`` and ``primary``
            # included, PostgreSQL): the runs table sorted by a metric under a parameter
            # filter reads ~10,000 runs of its configurations so (experiments.comparison.
            # runs_table), 8 us each instead of their ~7 rows each from the table. It took
            # the place of the foreign key's own index on (run), so ingest keeps the same
            # number of index entries per metric row (issue 30).
            models.Index(
                fields=["run", "name"], include=["value", "primary"], name="exp_metric_run_name"
            ),
        ]

    def __str__(self) -> str:
        it = f"[{self.iteration}]" if self.iteration is not None else ""
        return f"{self.name}{it} {self.stat} = {self.value:g} {self.unit}"

    def save(self, *args, **kwargs) -> None:
        with transaction.atomic():
            super().save(*args, **kwargs)
            refresh_summaries(run_ids=[self.run_id])

    def delete(self, *args, **kwargs):
        with transaction.atomic():
            deleted = super().delete(*args, **kwargs)
            refresh_summaries(run_ids=[self.run_id])
        return deleted


# --- One run's row in one plain statement ---------------------------------------------------


def _set_clause(fields: dict) -> tuple[list[str], list]:
    """SET items and parameters of ``fields`` (model field names), each value prepared by its
    field as the ORM's UPDATE prepares it. Each field's item and preparation are worked out
    once per process (``_set_plan``): the executor writes ~45 fields per run."""
    columns, params = [], []
    # The connection itself, not the thread-local proxy: each field's preparation reads a
    # few of its attributes (~100 proxy lookups per executed run).
    db = connections[DEFAULT_DB_ALIAS]
    plans = _SET_PLANS.get(db.vendor)
    if plans is None:
        plans = _SET_PLANS[db.vendor] = {}
    for name, value in fields.items():
        plan = plans.get(name)
        if plan is None:
            plan = plans[name] = _set_plan(name)
        item, kinds, prep = plan
        columns.append(item)
        # A text, float or bool as its field's preparation would leave it (to_python of a
        # str is itself), without the field's calls; anything else prepared by it (an int
        # too: on PostgreSQL it is wrapped in its column's type, Int4 or Int8).
        params.append(value if type(value) in kinds else prep(value, db))
    return columns, params


# Per vendor, per field name: its SET item, the value types it keeps as they are, and its
# field's get_db_prep_save.
_SET_PLANS: dict[str, dict[str, tuple[str, tuple[type, ...], Any]]] = {}
_KEPT_AS_THEY_ARE = {
    models.CharField: (str,),
    models.TextField: (str,),
    models.FloatField: (float,),
    models.BooleanField: (bool,),
}


def _set_plan(name: str) -> tuple[str, tuple[type, ...], Any]:
    field = Run._meta.get_field(name)
    kinds = _KEPT_AS_THEY_ARE.get(type(field), ())
    return f"{connection.ops.quote_name(field.column)} = %s", kinds, field.get_db_prep_save


def _has_metric(primary: bool) -> str:
    """SQL: whether the run of the row being updated has a metric row (a primary one)."""
    quote = connection.ops.quote_name
    run, metric = Run._meta.db_table, Metric._meta.db_table
    column = quote(Metric._meta.get_field("run").column)
    where = f" AND {quote(metric)}.{quote('primary')}" if primary else ""
    return (
        f"EXISTS (SELECT 1 FROM {quote(metric)} WHERE {quote(metric)}.{column} = "
        f"{quote(run)}.{quote('id')}{where})"
    )


def _running(attempt: int) -> tuple[str, list]:
    """SQL appended to a WHERE on the run's row, and its parameters: only while the run is
    running ``attempt`` (an executor's write)."""
    quote = connection.ops.quote_name
    status, attempts = (quote(Run._meta.get_field(f).column) for f in ("status", "attempts"))
    return f" AND {status} = %s AND {attempts} = %s", [Run.Status.RUNNING, attempt]


def update_row(run_id: int, fields: dict, attempt: int | None = None) -> int:
    """``Run.objects.filter(pk=run_id).update(**fields)`` as one plain UPDATE (the executor
    and the verdict write one run many times, and compiling the ORM's statements cost more
    CPU than the database spends on them); 1, or 0 when the row does not exist. With
    ``attempt``, only while the run is running that attempt (an executor's write): 0 once
    the janitor took the run from it (requeued, failed or cancelled it) or another attempt
    claimed it, so a worker cut off mid-run that comes back writes nothing over them.

    ``RunQuerySet.update``'s rule, in the same statement: when ``fields`` hold a column the
    configuration summaries read and the run has a headline metric (``RETURNING EXISTS``:
    the update changes no metric row), its summaries are refreshed in this transaction."""
    quote = connection.ops.quote_name
    columns, params = _set_clause(fields)
    sql = f"UPDATE {quote(Run._meta.db_table)} SET {', '.join(columns)} WHERE id = %s"
    params.append(run_id)
    if attempt is not None:
        condition, condition_params = _running(attempt)
        sql += condition
        params += condition_params
    summarised = bool(SUMMARY_FIELDS.intersection(fields))
    if not summarised and "status" not in fields:
        with prepared.cursor() as cursor:  # one statement: autocommit needs no BEGIN
            cursor.execute(sql, params)
            return cursor.rowcount
    # A new status of a run with metric rows may move it in or out of the data
    # (``data_changed``: its headline metrics are marked again).
    with transaction.atomic(savepoint=False), prepared.cursor() as cursor:
        cursor.execute(
            f"{sql} RETURNING {_has_metric(primary=True)}, {_has_metric(primary=False)}",
            params,
        )
        row = cursor.fetchone()
        if row is not None and row[0] and summarised:
            refresh_summaries(run_ids=[run_id])
        if row is not None and row[1] and "status" in fields:
            data_changed.send(sender=Run, run_ids=[run_id])
        return 0 if row is None else 1


def update_row_unflushed(run_id: int, fields: dict, attempt: int, insert=None) -> bool:
    """PostgreSQL, outside any transaction: ``update_row(run_id, fields, attempt)`` and the
    INSERT of ``insert`` (an unsaved model instance whose ``run_id`` is the run's, or None)
    in one statement, which is its own transaction, committed without waiting for its WAL
    flush: ``set_config('synchronous_commit', 'off', true)`` in its WITH sets it for that
    transaction only, as ``SET LOCAL`` does in a block (PostgreSQL reads the setting as the
    transaction commits, and undoes a local one after). What the executor's raw output
    was in five statements (issue 30): BEGIN, SET LOCAL, the INSERT, the UPDATE, COMMIT.

    True when written. False when nothing was: the row does not exist or no longer runs
    ``attempt``, or (``fields`` holding a column the configuration summaries read) the run
    has a metric row, whose summaries ``update_row`` would refresh in its transaction; the
    INSERT goes with the UPDATE (it inserts for the row the UPDATE returns), so then nothing
    is inserted either, and the caller takes its general path. ``fields`` hold no status
    (``update_row``'s ``data_changed``)."""
    if "status" in fields or connection.in_atomic_block or connection.vendor != "postgresql":
        raise ValueError("update_row_unflushed: PostgreSQL, autocommit, no status")
    quote = connection.ops.quote_name
    run_table = quote(Run._meta.db_table)
    columns, params = _set_clause(fields)
    condition, condition_params = _running(attempt)
    where = f"id = %s{condition}"
    params += [run_id, *condition_params]
    if SUMMARY_FIELDS.intersection(fields):
        where += f" AND NOT {_has_metric(primary=False)}"
    inserted = ""
    db = connections[DEFAULT_DB_ALIAS]
    if insert is not None:
        # Each value cast to its column's type without its length (PostgreSQL infers no
        # type for a parameter in a SELECT list; a cast to varchar(n) would cut a longer
        # value short, where the column's own assignment refuses it).
        items = []
        for field in insert._meta.concrete_fields:
            if field.primary_key:
                continue
            if field.attname == "run_id":
                items.append("updated.id")
                continue
            items.append(f"%s::{field.db_type(db).split('(')[0]}")
            params.append(field.get_db_prep_save(getattr(insert, field.attname), db))
        targets = ", ".join(
            quote(f.column) for f in insert._meta.concrete_fields if not f.primary_key
        )
        inserted = (
            f", inserted AS (INSERT INTO {quote(insert._meta.db_table)} ({targets}) "
            f"SELECT {', '.join(items)} FROM updated)"
        )
    sql = (
        "WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true) AS setting), "
        f"updated AS (UPDATE {run_table} SET {', '.join(columns)} WHERE {where} "
        f"RETURNING id){inserted} SELECT updated.id FROM updated, unflushed"
    )
    with prepared.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() is not None


# Runs whose outcome this process stored (``store_row`` with an attempt: the executor's)
# while they were in no adaptive matrix (or in no matrix cell): the adaptive decision that
# follows each run (experiments.matrices.adaptive.after_run) learns it here instead of
# reading the run and its matrix again. Taken once; the oldest forgotten past
# ENDED_MAX (a decision follows its outcome at once, on the same thread).
_ended: dict[int, None] = {}
ENDED_MAX = 1000


def _ended_outside_adaptive(run_id: int) -> None:
    _ended[run_id] = None
    while len(_ended) > ENDED_MAX:
        _ended.pop(next(iter(_ended)), None)


def taken_outside_adaptive(run_id: int) -> bool:
    """Whether this process just stored the outcome of ``run_id`` while it was in no
    adaptive matrix (``store_row``); the note is taken (True once)."""
    return _ended.pop(run_id, False) is None


def _adaptive() -> str:
    """SQL, in a RETURNING of the run's UPDATE: whether the run's matrix is adaptive as its
    outcome is stored (a run outside one is not): the adaptive decision after the run skips
    its own read when it is not (``taken_outside_adaptive``)."""
    quote = connection.ops.quote_name
    matrix = quote("experiments_matrix")
    return (
        f"{quote('cell_key')} <> '' AND EXISTS (SELECT 1 FROM {matrix} WHERE "
        f"{matrix}.{quote('id')} = {quote(Run._meta.db_table)}.{quote('matrix_id')} AND "
        f"{matrix}.{quote('max_repetitions')} IS NOT NULL AND "
        f"{matrix}.{quote('target_cv')} IS NOT NULL)"
    )


def _lease_delete() -> str:
    """SQL: delete the node leases of one attempt of a run (parameters: the run, the
    attempt), as ``experiments.execution.holding.release`` does."""
    table = connection.ops.quote_name(NodeLease._meta.db_table)
    return f"DELETE FROM {table} WHERE run_id = %s AND attempt = %s"


class StoredRow:
    """What ``store_row`` found: whether the run had metric rows (a headline one) before,
    and its configuration columns as the update left them (SUMMARY_KEY_COLUMNS' order)."""

    __slots__ = ("metrics", "primary", "columns", "status")

    def __init__(self, metrics: bool, primary: bool, columns: tuple, status: str = "") -> None:
        self.metrics, self.primary, self.columns = bool(metrics), bool(primary), columns
        self.status = status


def store_row(
    run_id: int,
    fields: dict,
    key: str,
    attempt: int | None = None,
    release: bool = False,
) -> StoredRow | None:
    """``update_row`` for a run whose metrics are about to be stored (experiments.results.store),
    also writing its configuration key ``key`` when it has no metric row at all (a first
    store: no summary counts it yet, so no configuration is left); a run that has some keeps
    the key its summaries last saw, and their refresh moves it. One statement that also
    returns what the store needs to know: the metric rows it had, its configuration
    columns (to check ``key``) and its status as written (whether its metrics are data).
    None when the row does not exist.

    The executor's outcome (issue 30: one statement, not three): ``attempt``, only while the
    run is running that attempt (as ``update_row``'s; None, nothing written, once it was
    taken from it); the row is locked by the UPDATE until the transaction ends, as the
    executor's check that it still holds the run locked it; and whether the run's matrix is
    adaptive is noted for ``taken_outside_adaptive`` (the decision after the run).
    ``release``: this attempt's node
    leases (``NodeLease``) are deleted in the same transaction, whatever the UPDATE finds
    (what ``experiments.execution.holding.release`` does): on PostgreSQL in the same
    statement (a data-modifying WITH), elsewhere (SQLite) in a DELETE of its own."""
    quote = connection.ops.quote_name
    columns, params = _set_clause(fields)
    key_column = quote("config_key")
    columns.append(f"{key_column} = CASE WHEN {_has_metric(False)} THEN {key_column} ELSE %s END")
    params.append(key)
    returning = ", ".join(
        [
            _has_metric(False),
            _has_metric(True),
            *(quote(Run._meta.get_field(c).column) for c in SUMMARY_KEY_COLUMNS),
            quote("status"),
        ]
    )
    where, where_params = "", []
    if attempt is not None:
        returning += f", {_adaptive()}"
        where, where_params = _running(attempt)
    lease_delete = _lease_delete()
    with_release, release_params = "", []
    if release and attempt is None:
        raise ValueError("release needs the attempt whose leases go")
    if release and connection.vendor == "postgresql":
        with_release, release_params = f"WITH released AS ({lease_delete}) ", [run_id, attempt]
    with transaction.atomic(savepoint=False), prepared.cursor() as cursor:
        if release and not with_release:
            cursor.execute(lease_delete, [run_id, attempt])
        cursor.execute(
            f"{with_release}UPDATE {quote(Run._meta.db_table)} SET {', '.join(columns)} "
            f"WHERE id = %s{where} RETURNING {returning}",
            [*release_params, *params, run_id, *where_params],
        )
        row = cursor.fetchone()
        if row is None:
            return None
        if attempt is not None:
            if not row[-1]:
                _ended_outside_adaptive(run_id)
            row = row[:-1]
        stored = StoredRow(row[0], row[1], tuple(row[2:-1]), row[-1])
        if stored.primary and SUMMARY_FIELDS.intersection(fields):
            refresh_summaries(run_ids=[run_id])
        return stored


def store_row_at_once(
    run_id: int,
    fields: dict,
    key: str,
    attempt: int,
    unchanged: dict,
    inserts: list[tuple[str, list]],
) -> bool:
    """PostgreSQL, outside any transaction: the executor's outcome of a run stored for the
    first time as one statement, which is its own (durable) transaction: ``store_row(run_id,
    fields, key, attempt, release=True)`` with the rows that go with it (``inserts``), where
    ``store_row`` is a transaction of five round trips (BEGIN, its UPDATE, the metrics'
    INSERT, the summaries' upsert, COMMIT; issue 30).

    The run's row is updated (``fields`` and its configuration key ``key``) only while the
    run is running ``attempt``, has no metric row yet, and its columns ``unchanged`` (model
    field names) still hold those values: what the caller computed ``inserts`` from. Each of
    ``inserts`` is (a data-modifying statement, its parameters), run in the same WITH, which
    must write nothing unless the CTE ``updated`` (the run's id, as updated) has a row; the
    attempt's node leases are deleted with it (``release``). True when written; False when
    nothing was (the run deleted, taken from the attempt, or not as the caller read it), and
    the caller takes its general path (``store_row`` in a transaction), which finds out why.
    Whether the run's matrix is adaptive is noted as ``store_row`` notes it."""
    if connection.in_atomic_block or connection.vendor != "postgresql":
        raise ValueError("store_row_at_once: PostgreSQL, autocommit")
    quote = connection.ops.quote_name
    run_table = quote(Run._meta.db_table)
    columns, params = _set_clause(fields)
    columns.append(f"{quote('config_key')} = %s")
    params.append(key)
    condition, condition_params = _running(attempt)
    where = [f"id = %s{condition} AND NOT {_has_metric(primary=False)}"]
    params += [run_id, *condition_params]
    db = connections[DEFAULT_DB_ALIAS]
    for name, value in unchanged.items():
        field = Run._meta.get_field(name)
        where.append(f"{quote(field.column)} IS NOT DISTINCT FROM %s")
        params.append(field.get_db_prep_save(value, db))
    parts = [
        f"updated AS (UPDATE {run_table} SET {', '.join(columns)} WHERE {' AND '.join(where)} "
        f"RETURNING id, {_adaptive()} AS adaptive)",
        f"released AS ({_lease_delete()} AND EXISTS (SELECT 1 FROM updated))",
    ]
    params += [run_id, attempt]
    for number, (sql, insert_params) in enumerate(inserts):
        parts.append(f"inserted_{number} AS ({sql})")
        params += insert_params
    with prepared.cursor() as cursor:
        cursor.execute(f"WITH {', '.join(parts)} SELECT adaptive FROM updated", params)
        row = cursor.fetchone()
    if row is None:
        return False
    if not row[0]:
        _ended_outside_adaptive(run_id)
    return True
