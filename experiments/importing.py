"""Importing existing benchmark output: the raw text is stored first, then parsed."""

from __future__ import annotations

from django.db import transaction

from experiments.ingest import replace_metrics
from experiments.input_checks import json_problem, text_problem
from experiments.models import Run
from experiments.models.runs import Tool
from runners.parsers import ParseError, ParseResult, parse

MAX_IMPORT_BYTES = 20 * 1024 * 1024


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


class ImportRefused(ValueError):
    """The testbed takes no runs (published study data)."""


def preview(text: str, tool: str | None = None, op: str | None = None) -> ParseResult:
    """Parse without saving anything; ParseError for unusable input."""
    options = {"op": op} if op else {}
    result = parse(text, tool=tool or None, **options)
    if result.extra.get("topology") and not result.metrics:
        raise ParseError(
            "this is BeeGFS topology output (nodes/targets), not a benchmark "
            "result: paste it into a testbed instead"
        )
    if result.tool not in Tool.values:
        raise ParseError(f"results of {result.tool} cannot be stored as runs")
    problem = json_problem(result.params, max_depth=20, where="params") or next(
        (
            p
            for m in result.metrics
            if (p := json_problem(m.extra or {}, max_depth=20, where=f"{m.name}.extra"))
        ),
        None,
    )
    if problem:
        raise ParseError(f"the output holds values that cannot be stored: {problem}")
    return result


def apply_result(run: Run, result: ParseResult) -> None:
    """Copy a parsed result onto a run and replace its metrics."""
    run.tool = result.tool
    run.tool_version = (result.tool_version or "")[:60]
    run.command = result.command or run.command
    run.params = result.params
    run.parse_error = ""
    with transaction.atomic():
        run.save(
            update_fields=["tool", "tool_version", "command", "params", "parse_error", "updated"]
        )
        replace_metrics(run, [m.to_dict() for m in result.metrics])


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
    )
    try:
        result = preview(text, tool=tool, op=op)
    except ParseError as exc:
        run.parse_error = str(exc)
        run.save(update_fields=["parse_error", "updated"])
        return run
    apply_result(run, result)
    return run


def reparse(run: Run, op: str | None = None) -> str | None:
    """Re-derive a run's metrics from its stored raw output; the error text, or None."""
    tool = run.tool if run.tool != Tool.OTHER else None
    try:
        result = preview(run.raw_output, tool=tool, op=op)
    except ParseError as exc:
        run.parse_error = str(exc)
        run.save(update_fields=["parse_error", "updated"])
        return str(exc)
    apply_result(run, result)
    return None
