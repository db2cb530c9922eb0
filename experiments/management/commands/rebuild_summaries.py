"""`manage.py rebuild_summaries [--check | --settle]`: recompute every configuration summary
from the runs (experiments.results.summaries.rebuild), or, with --check, compare the stored ones
with
a recomputation and exit non-zero when they differ (they never should: every change of a
run's metrics or configuration updates them in its transaction; a pending median, NULL, is
not a difference), or, with --settle, fill every pending median from its configuration's
values (experiments.results.summaries.settle; the janitor fills a bounded number per sweep)."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from experiments.results import summaries


class Command(BaseCommand):
    help = "Rebuild the configuration summaries from the runs, or check that they match."

    def add_arguments(self, parser):
        parser.add_argument(
            "--check",
            action="store_true",
            help="Change nothing: report differences from a recomputation, exit 1 if any.",
        )
        parser.add_argument(
            "--settle",
            action="store_true",
            help="Only fill the pending medians (merged by appends) from the values.",
        )

    def handle(self, *args, check, settle, **options):
        started = time.perf_counter()
        if check and settle:
            raise CommandError("rebuild_summaries: --check or --settle, not both")
        if settle:
            filled = summaries.settle()
            self.stdout.write(
                f"rebuild_summaries --settle: {filled:,} pending medians filled "
                f"({time.perf_counter() - started:.1f} s)"
            )
            return
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
        rows = summaries.rebuild()  # medians exact: none pending
        self.stdout.write(
            f"rebuild_summaries: {rows:,} summary rows ({time.perf_counter() - started:.1f} s)"
        )
