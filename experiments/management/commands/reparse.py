"""`manage.py reparse [--run UUID…] [--tool NAME]`: re-derive metrics and the parameters the
output states from stored raw output; what each run was launched with stays."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from experiments.models import Run
from experiments.results.store import reparsable, reparse


class Command(BaseCommand):
    help = "Re-parse stored raw output after a parser fix, without re-running anything."

    def add_arguments(self, parser):
        parser.add_argument("--run", action="append", default=[], help="Run UUID (repeatable).")
        parser.add_argument("--tool", help="Only runs of this tool.")

    def handle(self, *args, run, tool, **options):
        runs = reparsable(Run.objects.all())
        if run:
            runs = runs.filter(uuid__in=run)
        if tool:
            runs = runs.filter(tool=tool)
        ok = failed = 0
        for item in runs.iterator(chunk_size=200):
            error = reparse(item)
            if error:
                failed += 1
                self.stderr.write(f"run {item.uuid}: {error}")
            else:
                ok += 1
        self.stdout.write(f"reparse: {ok} runs re-derived, {failed} failed")
