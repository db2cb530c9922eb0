"""`manage.py rebuild_summaries [--check]`: recompute every configuration summary from the
runs (experiments.summaries.rebuild), or, with --check, compare the stored ones with a
recomputation and exit non-zero when they differ (they never should: every change of a run's
metrics or configuration refreshes them in its transaction)."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from experiments import summaries


class Command(BaseCommand):
    help = "Rebuild the configuration summaries from the runs, or check that they match."

    def add_arguments(self, parser):
        parser.add_argument(
            "--check",
            action="store_true",
            help="Change nothing: report differences from a recomputation, exit 1 if any.",
        )

    def handle(self, *args, check, **options):
        started = time.perf_counter()
        if check:
            found = summaries.differences(limit=0)
            for line in found[:50]:
                self.stdout.write(line)
            if found:
                raise CommandError(
                    f"rebuild_summaries --check: {len(found)} differences from the runs "
                    "(manage.py rebuild_summaries recomputes them)"
                )
            self.stdout.write(
                f"rebuild_summaries --check: the summaries match the runs "
                f"({time.perf_counter() - started:.1f} s)"
            )
            return
        rows = summaries.rebuild()
        self.stdout.write(
            f"rebuild_summaries: {rows:,} summary rows ({time.perf_counter() - started:.1f} s)"
        )
