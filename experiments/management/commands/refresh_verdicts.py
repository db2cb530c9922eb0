"""`manage.py refresh_verdicts [--run UUID…]`: recompute the stored bottleneck verdict and
steadiness of runs with telemetry (after a threshold changed, or for runs stored before the
summary existed); runs without telemetry are left as they are."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from experiments.models import Run
from experiments.results.telemetry import refresh_verdict


class Command(BaseCommand):
    help = "Recompute the stored bottleneck verdict of runs with telemetry."

    def add_arguments(self, parser):
        parser.add_argument("--run", action="append", default=[], help="Run UUID (repeatable).")

    def handle(self, *args, run, **options):
        runs = Run.objects.filter(telemetry__isnull=False).distinct().order_by("pk")
        if run:
            runs = runs.filter(uuid__in=run)
        counts: dict[str, int] = {}
        for item in runs.iterator(chunk_size=200):
            kind = refresh_verdict(item)["bottleneck"]
            counts[kind] = counts.get(kind, 0) + 1
        total = sum(counts.values())
        detail = ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))
        self.stdout.write(f"refresh_verdicts: {total} runs" + (f" ({detail})" if detail else ""))
