"""Find the change points of every configuration's history again (or only what is pending)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from experiments.changes import scan


class Command(BaseCommand):
    help = (
        "Detect change points over the runs of every configuration (a full rescan), of one "
        "configuration (--config), or only of configurations with runs not analysed yet "
        "(--pending, what the beat task does)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--config", default="", help="one configuration key (32 hex digits)")
        parser.add_argument(
            "--pending", action="store_true", help="only configurations with new runs"
        )

    def handle(self, *args, config: str, pending: bool, **options) -> None:
        if config and (len(config) != 32 or any(c not in "0123456789abcdef" for c in config)):
            raise CommandError("--config must be a configuration key: 32 hexadecimal digits")
        result = scan.analyse_pending() if pending else scan.rescan(config or None)
        self.stdout.write(
            f"analysed {result['analysed']} configuration metrics; "
            f"{result['changes']} change points found or updated"
        )
