"""Per-configuration summaries of the runs' headline metrics (experiments.results.summaries keeps
them; the comparison reads them instead of every metric row)."""

from __future__ import annotations

from django.db import models

from experiments.models.runs import Run


class ConfigSummary(models.Model):
    """One metric over the alike runs of one configuration (DESIGN.md, "Alike runs": tool,
        every parameter, testbed, target, tuning set and data source; ``Run.config_key``).

        Holds what a comparison point needs without reading the runs: the count, sum, sum of
        squared deviations from the mean (``m2``, numerically stable where a sum of squares is
        not), extremes, the exact median, and the counts of published runs, approximate values,
        stored verdicts, collapsed runs and steady-state/whole-run throughput (the median may be
    pending: NULL, see below). ``run`` is one run
        of the configuration (its lowest id): every dimension a comparison groups or filters by
        that is an attribute of the configuration (a parameter, the testbed's hardware, the tuning
        set) is read through it, as it is now. Rows are merged with (new runs) or replaced by (any
        other change) the figures of their runs in the transaction that changes them
        (experiments.results.summaries), never edited elsewhere."""

    name = models.CharField(max_length=40)
    config_key = models.CharField(max_length=32)
    # No database constraint: the row is rebuilt, in the same transaction, when its run goes.
    run = models.ForeignKey(Run, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    n = models.IntegerField()
    total = models.FloatField()
    m2 = models.FloatField()
    min = models.FloatField()
    max = models.FloatField()
    # The exact median; NULL while pending: an append (experiments.results.summaries.append) merges
    # everything else exactly but not the median, which ``settle`` (the janitor) or the next
    # recomputation fills from the values. A reader needing it meanwhile computes it
    # (experiments.results.summaries.medians).
    median = models.FloatField(null=True, blank=True)
    approx_n = models.IntegerField(default=0)
    pub_n = models.IntegerField(default=0)
    # One count per experiments.shared.bottleneck.KINDS.
    bn_disk = models.IntegerField(default=0)
    bn_cpu = models.IntegerField(default=0)
    bn_network = models.IntegerField(default=0)
    bn_beegfs = models.IntegerField(default=0)
    bn_none = models.IntegerField(default=0)
    bn_unknown = models.IntegerField(default=0)
    collapsed_n = models.IntegerField(default=0)
    steady_n = models.IntegerField(default=0)
    steady_sum = models.FloatField(null=True, blank=True)
    whole_n = models.IntegerField(default=0)
    whole_sum = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name", "config_key"], name="exp_summary_name_key")
        ]
        indexes = [
            models.Index(fields=["config_key"], name="exp_summary_key"),
            # Pending medians (experiments.results.summaries.settle): found without a scan.
            models.Index(
                fields=["config_key", "name"],
                condition=models.Q(median__isnull=True),
                name="exp_summary_pending",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} over {self.n} runs of configuration {self.config_key}"
