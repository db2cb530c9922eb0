"""`manage.py import_results FILE… --testbed NAME|UUID [--tuning NAME|UUID]`: bulk import."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from experiments.models import Testbed, TuningSet
from experiments.results.importing import (
    MAX_IMPORT_BYTES,
    binary_problem,
    import_runs,
    item_problem,
)
from experiments.shared.utils import is_uuid
from runners.parsers.base import PART_PLURALS


def find(model, value: str, what: str):
    matches = (
        model.objects.filter(uuid=value) if is_uuid(value) else model.objects.filter(name=value)
    )
    found = list(matches[:2])
    if not found:
        raise CommandError(f"no {what} named {value!r}")
    if len(found) > 1:
        raise CommandError(f"several {what}s are named {value!r}: give its UUID")
    return found[0]


class Command(BaseCommand):
    help = "Import benchmark output files as runs (raw text stored, then parsed)."

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+")
        parser.add_argument("--testbed", required=True, help="Testbed name or UUID.")
        parser.add_argument("--tuning", help="Tuning set name or UUID.")
        parser.add_argument("--tool", help="Tool name; detected from each file when omitted.")
        parser.add_argument("--op", choices=["read", "write"], help="Direction for dd output.")

    def handle(self, *args, files, testbed, tuning, tool, op, **options):
        testbed_obj = find(Testbed, testbed, "testbed")
        if testbed_obj.published:
            raise CommandError(
                f"testbed {testbed_obj.name!r} is published study data (read-only): "
                "it accepts no runs"
            )
        tuning_obj = find(TuningSet, tuning, "tuning set") if tuning else None
        failed = 0
        for name in files:
            path = Path(name)
            try:
                data = path.read_bytes()
            except OSError as exc:
                self.stderr.write(f"{name}: cannot read: {exc.strerror or exc}")
                failed += 1
                continue
            if len(data) > MAX_IMPORT_BYTES:
                self.stderr.write(f"{name}: larger than {MAX_IMPORT_BYTES // 2**20} MiB, skipped")
                failed += 1
                continue
            problem = binary_problem(data)
            if problem:
                self.stderr.write(f"{name} {problem}, skipped")
                failed += 1
                continue
            text = data.decode("utf-8", errors="replace")
            problem = item_problem(path.name, text)
            if problem:
                self.stderr.write(f"{name}: {problem}, skipped")
                failed += 1
                continue
            runs = import_runs(
                text,
                testbed=testbed_obj,
                tuning_set=tuning_obj,
                tool=tool,
                op=op,
                label=path.name,
            )
            run = runs[0]
            if len(runs) > 1:
                part = run.launch["part"]
                kind = PART_PLURALS.get(part["kind"], part["kind"])
                self.stdout.write(
                    f"{name}: {len(runs)} independent {kind}, stored as {len(runs)} runs:"
                )
                for each in runs:
                    self.stdout.write(
                        f"  run {each.uuid} [{each.launch['part']['label']}] "
                        f"({each.metrics.count()} metrics)"
                    )
            elif run.parse_error:
                failed += 1
                self.stderr.write(
                    f"{name}: stored as run {run.uuid} but not parsed: {run.parse_error}"
                )
            else:
                self.stdout.write(
                    f"{name}: run {run.uuid} ({run.tool} {run.tool_version}, "
                    f"{run.metrics.count()} metrics)"
                )
        if failed:
            raise CommandError(f"{failed} of {len(files)} files were not fully imported")
