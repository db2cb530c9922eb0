"""Which of a large matrix's runs its page draws (issue 30): a matrix of 10,000 runs opens as
fast as one of 10.

The page's charts (the sweep's parallel coordinates, the latency charts) and the metrics its
comparison link opens on read every run of a small matrix; of one with more than
``SAMPLE_RUNS`` runs, the first repetitions of every cell, as many as fit in that many runs
(every cell is drawn, each with the same number of repetitions), read in (cell, repetition)
order from the matrix's unique (matrix, cell key, repetition) index with a LIMIT, so that
the reads stop at the sample whatever the matrix's size. The page says when it shows a
sample; every run stays in the runs table of the matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

from experiments.models import Matrix, Run

SAMPLE_RUNS = 100


@dataclass(frozen=True)
class Sample:
    """The runs the page draws of the matrix ``matrix_id``: those of repetition at most
    ``repetitions`` (None: every run), at most ``limit`` of them; ``total``: the matrix's
    runs."""

    matrix_id: int
    repetitions: int | None
    limit: int
    total: int

    @property
    def partial(self) -> bool:
        return self.repetitions is not None

    def describe(self) -> str:
        """What a partial sample holds, in words: "the first 8 repetitions of every cell"."""
        first = "repetition" if self.repetitions == 1 else f"{self.repetitions} repetitions"
        return f"the first {first} of every cell"

    def runs(self, runs=None):
        """``runs`` (the matrix's runs by default) within the sample's repetitions, in (cell,
        repetition) order: slice it to ``limit`` after any further filter."""
        runs = Run.objects.filter(matrix_id=self.matrix_id) if runs is None else runs
        if self.repetitions is not None:
            runs = runs.filter(repetition__lte=self.repetitions)
        return runs.order_by("cell_key", "repetition")


def sample(matrix: Matrix, total: int, limit: int | None = None) -> Sample:
    """The sample of ``matrix``, which holds ``total`` runs (its progress counts them), of at
    most ``limit`` (SAMPLE_RUNS) runs."""
    limit = SAMPLE_RUNS if limit is None else limit
    if total <= limit:
        return Sample(matrix.pk, None, limit, total)
    cells = Run.objects.filter(matrix=matrix, repetition=1).count()
    return Sample(matrix.pk, max(1, limit // max(cells, 1)), limit, total)
