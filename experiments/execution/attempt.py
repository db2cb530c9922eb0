"""One attempt of a run by this worker, from its claim to its outcome: what the executor
(``experiments.execution.execute``) knows about the attempt and the Run row does not.

``execute.claim`` creates the ``Attempt``; every step after it takes the attempt: holding
the run's nodes (``_hold``), its directories, the Slurm allocation
(``experiments.execution.allocation``), the preparation steps and the tool (``_supervise``),
and the outcome (``_finish``). The attempt's writes of the run go through ``Attempt.update``
(with the fields it staged); ``update_run`` writes a run outside any attempt (the janitor).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from experiments.models import Run
from experiments.models.runs import update_row, update_row_unflushed
from experiments.shared import clock, prepared

# What a step of an attempt ends with: (status, output, exit code, error).
Outcome = tuple[str, str, int | None, str]


def update_run(run: Run, attempt: int | None = None, **fields: Any) -> int:
    """Write fields of the run as one plain UPDATE that keeps the configuration summaries'
    rule (``experiments.models.runs.update_row``), and set them on ``run``; 0 when its row
    no longer exists (deleted meanwhile), or, with ``attempt``, when the run no longer runs
    that attempt."""
    fields.setdefault("updated", clock.now())
    count = update_row(run.pk, fields, attempt)
    for key, value in fields.items():
        setattr(run, key, value)
    return count


@dataclass(eq=False)
class Attempt:
    """One attempt of ``run`` on this worker, claimed with dispatch token ``token`` by
    ``worker`` (the run's row as the claim wrote it; the attempt's writes keep it current).

    - ``held``: the run holds all its nodes (the claim got them, or ``_hold`` did).
    - ``staged``: fields already set on ``run`` that its next write stores (``stage``).
    - ``telemetry``: this node's telemetry document of the tool's run, kept from the end of
      the recording (``keep_telemetry``) until the outcome stores it with the raw output.
    - ``released``: the outcome's transaction freed the run's nodes (nothing is left for the
      executor's ``finally`` to free).
    - ``started``: a process of the attempt (a preparation step or the tool) was started; an
      attempt that fails before one did may be taken up again by a retry of its task.
    """

    run: Run
    token: str
    worker: str
    held: bool = False
    staged: dict[str, Any] = field(default_factory=dict)
    telemetry: dict[str, Any] | None = None
    released: bool = False
    started: bool = False

    def stage(self, **fields: Any) -> None:
        """Set fields of the run that are written with its next write (``update``) rather
        than in a commit of their own: the command and the tool's pid, which a run of a few
        milliseconds would otherwise pay a durable commit each for. A run that outlasts its
        first wait writes them at once (``execute._supervise``)."""
        self.staged.update(fields)
        for key, value in fields.items():
            setattr(self.run, key, value)

    def update(self, **fields: Any) -> int:
        """Write fields of the run, and those staged (``update_run``), while the run is still
        running this attempt; 0 (nothing written) when its row no longer exists (deleted
        meanwhile) or the run was taken from this attempt: the janitor requeued, failed or
        cancelled it after its heartbeats stopped (a worker cut off from the database that
        comes back), or a later attempt claimed it. Every step that writes takes 0 as the
        end of the attempt (its tool is stopped, its outcome dropped)."""
        staged, self.staged = self.staged, {}
        try:
            return update_run(self.run, attempt=self.run.attempts, **{**staged, **fields})
        except BaseException:
            # Not written (the database unreachable): the next write carries them again.
            self.staged = {**staged, **self.staged}
            raise

    def update_unflushed(self, insert: Any = None, **fields: Any) -> bool:
        """``update`` with the INSERT of ``insert`` (a row of the run, or None) in one
        statement committed without waiting for its WAL flush (PostgreSQL, outside any
        transaction: ``experiments.models.runs.update_row_unflushed``); False, nothing
        written and the staged fields kept, when the run no longer runs this attempt or has
        a metric row (the caller takes its general path)."""
        fields = {**self.staged, **fields}
        fields.setdefault("updated", clock.now())
        if not update_row_unflushed(self.run.pk, fields, self.run.attempts, insert):
            return False
        self.staged = {}
        for key, value in fields.items():
            setattr(self.run, key, value)
        return True

    def current(self) -> bool:
        """Whether the run is still running this attempt, its row locked until the end of the
        transaction (so nothing takes it meanwhile): what storing the outcome checks first.
        One plain statement (the ORM compiled it for every run)."""
        lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
        with prepared.cursor() as cursor:
            cursor.execute(
                f'SELECT 1 FROM "{Run._meta.db_table}" WHERE id = %s AND status = %s '
                f"AND attempts = %s{lock}",
                [self.run.pk, Run.Status.RUNNING.value, self.run.attempts],
            )
            return cursor.fetchone() is not None

    def keep_telemetry(self, doc: dict[str, Any]) -> None:
        """Keep this node's document until the outcome stores it (``telemetry.recording``'s
        ``keep``)."""
        self.telemetry = doc

    def take_telemetry(self) -> dict[str, Any] | None:
        """The kept document (None without one), no longer kept."""
        doc, self.telemetry = self.telemetry, None
        return doc
