"""Importing existing benchmark output (browser, ``manage.py import_results``): each item is
checked, stored as a run with its raw text, then parsed through ``experiments.results``."""

from __future__ import annotations

from experiments.input_checks import text_problem
from experiments.models import Run
from experiments.models.runs import Tool
from experiments.results import (
    MAX_OUTPUT_BYTES,
    parse_options,
    parse_output,
    parse_stored,
    record_launch,
)
from runners.parsers import ParseResult

MAX_IMPORT_BYTES = MAX_OUTPUT_BYTES


def item_problem(name: str, text: str) -> str | None:
    """Why one item of an import cannot be stored (too large, a NUL character or a lone
    surrogate in its name or text), or None. Every item of an import is checked."""
    chars = len(text)
    size = chars if chars > MAX_IMPORT_BYTES else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_IMPORT_BYTES:
        return f"larger than {MAX_IMPORT_BYTES // 2**20} MiB"
    problem = text_problem(name)
    if problem:
        return f"the name {problem}"
    problem = text_problem(text)
    return f"the output {problem}" if problem else None


def preview(text: str, tool: str | None = None, op: str | None = None) -> ParseResult:
    """What importing ``text`` would store, saving nothing; ParseError for unusable input."""
    return parse_output(text, tool, parse_options(op))


class ImportRefused(ValueError):
    """The testbed takes no runs (published study data)."""


def import_output(
    text: str,
    *,
    testbed,
    tuning_set=None,
    owner=None,
    tool: str | None = None,
    op: str | None = None,
    label: str = "",
) -> Run:
    """Store ``text`` as an imported run, then parse it. A parse failure keeps the run (and its
    raw text) with the error recorded, so nothing is lost and ``reparse`` can retry.
    ImportRefused for a published testbed: published study data accepts no runs."""
    if testbed.published:
        raise ImportRefused(
            f"testbed {testbed.name!r} is published study data (read-only): it accepts no runs"
        )
    run = Run.objects.create(
        testbed=testbed,
        tuning_set=tuning_set,
        owner=owner,
        label=label[:200],
        tool=tool if tool in Tool.values else Tool.OTHER,
        status=Run.Status.IMPORTED,
        raw_output=text,
        launch=record_launch({}, {}, parse_options(op)),
    )
    parse_stored(run, tool)
    return run
