"""Telemetry of a run: one row per run and node, its series packed into one compressed blob."""

from __future__ import annotations

from django.db import models

from experiments.models.runs import Run


class RunTelemetry(models.Model):
    """What one node did while one run's tool ran (runners.sampler's document).

    Why one row per (run, node) with the series in one zlib-compressed JSON blob rather than a
    row per sample or per series: a run page reads all series of a run's nodes at once and
    nothing queries inside them, so the blob is read with one index lookup on ``run`` and
    costs ~1 KB per node-minute of an idle 2-core node (docs/telemetry.md has the figures);
    50,000 rows (10,000 runs x 5 nodes) keep the table small and the lookup flat, where a row
    per sample would be 30 million rows. ``summary`` keeps the few numbers a list or a filter
    needs (the busiest disk, core and link) so those never unpack a blob. The per-core series
    have a blob of their own (``cores``): a run page does not read them."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="telemetry")
    hostname = models.CharField(max_length=253)
    started_at = models.DateTimeField(help_text="Wall clock (UTC) of the node's first reading.")
    interval_s = models.FloatField()
    samples = models.PositiveIntegerField()
    data = models.BinaryField(help_text="zlib-compressed JSON: t, node-wide series, tool.")
    cores = models.BinaryField(blank=True, help_text="zlib-compressed JSON: per-core series.")
    meta = models.JSONField(default=dict, blank=True)
    summary = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["run", "hostname"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "hostname"], name="%(app_label)s_%(class)s_unique_run_host"
            )
        ]

    def __str__(self) -> str:
        return f"telemetry of run {self.run_id} on {self.hostname}"
