"""`manage.py parse_output PATH [--tool NAME] [--op read|write]`: the stable parsing contract.

Prints one JSON object and exits 0, or prints one line naming the problem to stderr and
exits 2 (../shared/DESIGN.md, "Stable interfaces").
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand

from runners.parsers import ParseError, parse

MAX_BYTES = 256 * 1024 * 1024


class Command(BaseCommand):
    help = "Parse one benchmark output file and print its result as JSON."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--tool", help="Tool name; detected from the content when omitted.")
        parser.add_argument(
            "--op", choices=["read", "write"], help="Direction for outputs that do not say (dd)."
        )

    def handle(self, *args, path: str, tool: str | None, op: str | None, **options):
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_BYTES + 1)
        except OSError as exc:
            self._fail(f"cannot read {path}: {exc.strerror or exc}")
        if len(data) > MAX_BYTES:
            self._fail(f"{path}: larger than {MAX_BYTES // 2**20} MiB")
        text = data.decode("utf-8", errors="replace")
        extra = {"op": op} if op else {}
        try:
            result = parse(text, tool=tool, **extra)
        except ParseError as exc:
            self._fail(f"{path}: {exc}")
        self.stdout.write(json.dumps(result.to_dict(), sort_keys=False))

    def _fail(self, message: str) -> None:
        sys.stderr.write(message.replace("\n", " ") + "\n")
        sys.stderr.flush()
        raise SystemExit(2)
