"""Benchmark matrices: tool × parameter axes × testbeds × tuning sets × repetitions."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse

from experiments.models.common import OwnedModel
from experiments.models.inventory import Testbed
from experiments.models.tuning import TuningSet
from runners import registry


class LaunchMode(models.TextChoices):
    SINGLE = "single", "one process on the launcher node"
    MPI = "mpi", "MPI (mpirun over the testbed's client nodes)"
    MULTIHOST = "multihost", "the tool's own multi-host mode"
    SLURM = "slurm", "Slurm (a job on the testbed's partition; Slurm chooses the clients)"


class Matrix(OwnedModel):
    """A planned sweep. Each combination of axis values, testbed and tuning set is a *cell*;
    each repetition of a cell is a run. Expanding twice creates nothing new."""

    name = models.CharField(max_length=160)
    description = models.TextField(blank=True)
    tool = models.CharField(max_length=registry.MAX_NAME, choices=registry.runnable_choices)
    launch_mode = models.CharField(
        max_length=10, choices=LaunchMode.choices, default=LaunchMode.SINGLE
    )
    tasks_per_node = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(1024)],
        help_text="MPI ranks per client node (MPI and Slurm modes).",
    )
    # {"param": value}: the tool parameters every run shares.
    fixed_params = models.JSONField(default=dict, blank=True)
    # [{"param": "numjobs", "values": [1, 2, 4]}] or
    # [{"param": "numjobs", "range": {"start": 1, "stop": 1024, "scale": "pow2"}}];
    # "param" may be a tool parameter, "target" (targets of the testbed by name) or
    # "tuning:<scope.key>" (recorded with the run; applied when apply_tuning is set).
    axes = models.JSONField(default=list, blank=True)
    # Python-like boolean expressions over parameters and testbed facts; a cell for which
    # one is true is skipped, e.g. "numjobs > clients * cores".
    exclusions = models.JSONField(default=list, blank=True)
    testbeds = models.ManyToManyField(Testbed, related_name="matrices")
    tuning_sets = models.ManyToManyField(TuningSet, blank=True, related_name="matrices")
    repetitions = models.PositiveSmallIntegerField(
        default=3, validators=[MinValueValidator(1), MaxValueValidator(100)]
    )
    drop_caches = models.BooleanField(
        default=True, help_text="Drop the page cache before each run (needs root on the node)."
    )
    apply_tuning = models.BooleanField(
        default=False,
        help_text="Apply the tuning set's OS and striping settings through the allowlist "
        "before each run.",
    )
    timeout_s = models.PositiveIntegerField(
        "timeout per run (s)",
        default=3600,
        validators=[MinValueValidator(1), MaxValueValidator(7 * 24 * 3600)],
    )
    launched_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        verbose_name_plural = "matrices"

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("experiments:matrix", args=[self.uuid])
