"""Changes beeweb made to a BeeGFS server's config file (issue 26), one row per change: what
the file said, what was asked, when it was applied and when the original came back. Written
by the server node's own worker (experiments.execution.beegfs), shown on the matrix page."""

from __future__ import annotations

from django.db import models

from experiments.models.matrices import Matrix
from experiments.models.runs import Run


class BeegfsConfigChange(models.Model):
    """One service of one node with a tuning set's keys written into its config file."""

    hostname = models.CharField(max_length=253, db_index=True)
    service = models.CharField(max_length=16)  # storage | meta
    conf = models.CharField(max_length=4096, help_text="The config file on the node.")
    matrix = models.ForeignKey(
        Matrix, null=True, blank=True, on_delete=models.SET_NULL, related_name="beegfs_changes"
    )
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="beegfs_changes"
    )
    tuning_set = models.CharField(max_length=200, blank=True)
    before = models.JSONField(default=dict, help_text="The asked keys' values in the original.")
    after = models.JSONField(default=dict, help_text="The values written.")
    applied_at = models.DateTimeField()
    restart_s = models.FloatField(null=True, blank=True)
    online_s = models.FloatField(null=True, blank=True)
    outcome = models.TextField(blank=True)
    restored_at = models.DateTimeField(null=True, blank=True)
    restore_outcome = models.TextField(blank=True)

    class Meta:
        ordering = ["-applied_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.hostname} {self.service} config changed at {self.applied_at:%Y-%m-%d %H:%M}"
