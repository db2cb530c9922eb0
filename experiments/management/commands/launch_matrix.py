"""`manage.py launch_matrix FILE.yaml [--wait]`: create a matrix from YAML and launch it.

Exit status: 0 when launched (with --wait: when every run succeeded), 1 when some run failed
or was cancelled, 2 for an invalid file (one line on stderr names the problem), 3 when the
broker is unreachable (the matrix is kept with its runs planned), 4 when a testbed's live
topology differs from the stored one or its live node cannot be asked (nothing is kept;
``--override-topology`` launches anyway and the matrix records it).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from experiments.execution import dispatch as dispatching
from experiments.matrices import livecheck
from experiments.matrices.axes import MatrixError
from experiments.matrices.expansion import launch, progress
from experiments.matrices.files import MAX_YAML_BYTES, from_data, parse_yaml, too_large
from experiments.matrices.preview import plan
from experiments.models import CellState, Run, Testbed


class Command(BaseCommand):
    help = "Create a matrix from a YAML file and launch it (--wait: until every run ends)."

    def add_arguments(self, parser):
        parser.add_argument("file", help="Matrix definition (YAML); '-' reads stdin.")
        parser.add_argument(
            "--wait", action="store_true", help="Wait for every run to end, printing progress."
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=0,
            help="With --wait: give up after this many seconds (0: never).",
        )
        parser.add_argument(
            "--owner", help="User who owns the matrix (default: the first superuser)."
        )
        parser.add_argument(
            "--override-topology",
            action="store_true",
            help="Launch even when a testbed's live BeeGFS topology differs from the stored one "
            "(recorded on the matrix).",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Print the preview (runs, commands) and create nothing.",
        )

    def handle(self, *args, file, wait, timeout, owner, dry_run, override_topology, **options):
        user = self._owner(owner)
        try:
            text = sys.stdin.read(MAX_YAML_BYTES + 1) if file == "-" else self._read(Path(file))
            data = parse_yaml(text)
            self._localhost(data, user)
            matrix = from_data(data, user)
        except MatrixError as exc:
            self.stderr.write(f"{file}: {exc}")
            sys.exit(2)
        try:
            planned = plan(matrix)
            if planned.errors:
                first = planned.errors[0]
                raise MatrixError("params", f"{first.cell.label}: {first.error}")
            runs = (
                f"{planned.runs}"
                if planned.max_runs is None
                else f"{planned.runs}-{planned.max_runs}"
            )
            self.stdout.write(
                f"matrix {matrix.name} ({matrix.uuid}): {runs} runs, "
                f"{planned.excluded} cells skipped by rules"
            )
            if dry_run:
                for cell in planned.active:
                    self.stdout.write("  " + " ".join(cell.argv))
                matrix.delete()
                return
            checks = livecheck.check_matrix(matrix, user)
            if checks and not override_topology:
                for check in checks:
                    for line in [check.problem] if check.problem else check.differences:
                        self.stderr.write(f"{check.testbed.name}: {line}")
                matrix.delete()
                self.stderr.write(
                    f"{file}: nothing was launched: the live topology differs from the stored "
                    "one (--override-topology launches anyway)"
                )
                sys.exit(4)
            counts = launch(matrix)
            if checks:
                livecheck.record_override(matrix, user, checks)
        except MatrixError as exc:
            matrix.delete()
            self.stderr.write(f"{file}: {exc}")
            sys.exit(2)
        except dispatching.BrokerUnavailable as exc:
            # The matrix stays, its runs planned: its Launch button sends them later.
            self.stderr.write(f"{file}: matrix {matrix.name} ({matrix.uuid}) was kept. {exc}")
            sys.exit(3)
        self.stdout.write(f"queued {counts['queued']} runs")
        if wait:
            self._wait(matrix, timeout)

    def _read(self, path: Path) -> str:
        try:
            problem = too_large(path.stat().st_size)
            if problem:
                raise MatrixError("file", problem)
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise MatrixError("file", f"cannot read it ({exc})") from None

    def _owner(self, username: str | None):
        users = get_user_model().objects
        if username:
            user = users.filter(username=username).first()
            if user is None:
                raise CommandError(f"no user named {username!r}")
            return user
        user = users.filter(is_superuser=True).order_by("pk").first()
        if user is None:
            raise CommandError("no superuser yet: run manage.py ensure_admin or pass --owner")
        return user

    def _localhost(self, data: dict, user) -> None:
        """A file naming the "localhost" testbed works on a fresh installation."""
        names = data.get("testbeds") or []
        if (
            "localhost" in ([names] if isinstance(names, str) else names)
            and not Testbed.objects.filter(name="localhost").exists()
        ):
            from experiments.inventory.localhost import ensure_localhost_testbed

            ensure_localhost_testbed(user)

    @staticmethod
    def _decided(matrix) -> bool:
        """An adaptive matrix is done once every cell has a state other than measuring:
        between a run's end and its cell's decision, every run may be finished while the
        next repetition is still to be added (experiments.matrices.adaptive)."""
        if not matrix.adaptive:
            return True
        cells = matrix.runs.values("cell_key").distinct().count()
        states = matrix.cell_states.exclude(state=CellState.State.MEASURING).count()
        return states >= cells

    def _wait(self, matrix, timeout: float) -> None:
        deadline = time.monotonic() + timeout if timeout else None
        last = None
        while True:
            state = progress(matrix)
            line = f"{state['finished']}/{state['total']} finished " + " ".join(
                f"{k}={v}" for k, v in sorted(state["counts"].items())
            )
            if line != last:
                self.stdout.write(line)
                last = line
            if state["finished"] == state["total"] and self._decided(matrix):
                break
            if deadline and time.monotonic() > deadline:
                self.stderr.write(f"gave up waiting after {timeout:.0f} s")
                sys.exit(1)
            time.sleep(1)
        bad = matrix.runs.exclude(status=Run.Status.SUCCEEDED)
        for run in bad:
            self.stderr.write(f"{run.label}: {run.status}: {run.error or run.parse_error}")
        if bad.exists():
            sys.exit(1)
