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


class RunOrder(models.TextChoices):
    CELLS = "cells", "cell by cell (every repetition of a cell, then the next cell)"
    INTERLEAVED = "interleaved", "interleaved (every cell once, then every cell again, …)"
    RANDOM = "random", "random (shuffled with a recorded seed)"


# An order seed is drawn below this (fits PostgreSQL's integer and JavaScript's numbers).
MAX_ORDER_SEED = 2**31 - 1


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
    # With max_repetitions and target_cv, ``repetitions`` is the minimum: a cell gets more
    # runs, one after another, until its primary metric's coefficient of variation is at
    # most target_cv (experiments/matrices/adaptive.py), or it reaches max_repetitions unsettled.
    repetitions = models.PositiveSmallIntegerField(
        default=3, validators=[MinValueValidator(1), MaxValueValidator(100)]
    )
    max_repetitions = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(2), MaxValueValidator(100)],
        help_text="Adaptive: at most this many runs per cell (empty: exactly the repetitions).",
    )
    target_cv = models.FloatField(
        "target CV (%)",
        null=True,
        blank=True,
        validators=[MinValueValidator(0.01), MaxValueValidator(99.99)],
        help_text="Adaptive: add runs until the coefficient of variation is at most this.",
    )
    # The order the runs are created and so sent in (experiments.execution.dispatch sends in pk
    # order):
    # interleaved or random, a drift over time (filling disks, warming drives) spreads over
    # all cells instead of looking like a parameter's effect.
    order = models.CharField(max_length=12, choices=RunOrder.choices, default=RunOrder.CELLS)
    order_seed = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(MAX_ORDER_SEED)],
        help_text="Random order: the seed (drawn at the first launch when empty).",
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
    # Launches that went ahead although a testbed's live topology differed from the stored
    # one (or its node could not be asked): who, when, and what differed.
    topology_overrides = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created"]
        verbose_name_plural = "matrices"
        indexes = [
            # The matrix list, newest first, paged by a keyset cursor (ties by id).
            models.Index(fields=["-created", "-id"], name="exp_matrix_created_id"),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("experiments:matrix", args=[self.uuid])

    @property
    def tasks_per_node_swept(self) -> bool:
        """Whether a fixed parameter or an axis gives the tasks per node (not this field)."""
        names = set(self.fixed_params or {}) | {
            a.get("param") for a in self.axes or [] if isinstance(a, dict)
        }
        return "tasks_per_node" in names

    @property
    def adaptive(self) -> bool:
        return self.max_repetitions is not None and self.target_cv is not None


class CellState(models.Model):
    """Why a cell of an adaptive matrix has the number of runs it has, written by
    experiments.matrices.adaptive each time one of its runs ends; read by the matrix page and the
    comparison (one row per cell, so neither recomputes CVs)."""

    class State(models.TextChoices):
        MEASURING = "measuring", "measuring"
        SETTLED = "settled", "settled"
        UNSETTLED = "unsettled", "never settled"
        SHORT = "short", "short of runs"

    matrix = models.ForeignKey(Matrix, on_delete=models.CASCADE, related_name="cell_states")
    cell_key = models.CharField(max_length=64)
    state = models.CharField(max_length=10, choices=State.choices)
    n = models.PositiveSmallIntegerField(default=0, help_text="Succeeded runs.")
    runs = models.PositiveSmallIntegerField(default=0, help_text="Runs of the cell, any status.")
    cv = models.FloatField(null=True, blank=True, help_text="Coefficient of variation (%).")
    metric = models.CharField(max_length=40, blank=True)
    reason = models.CharField(max_length=300)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["matrix", "cell_key"], name="%(app_label)s_cellstate_unique_cell"
            )
        ]

    def __str__(self) -> str:
        return f"{self.cell_key[:8]}: {self.reason}"
