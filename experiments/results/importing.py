"""Importing existing benchmark output (browser, ``manage.py import_results``): each item is
checked, stored as a run with its raw text, then parsed through ``experiments.results.store``;
an output of several independent measurements (fio stonewall groups, an IOR or mdtest log of
several runs) becomes one run per measurement (``store.store_parts``)."""

from __future__ import annotations

import json
import re

from experiments.models import Run
from experiments.models.runs import Tool
from experiments.results.store import (
    MAX_OUTPUT_BYTES,
    parse_options,
    parse_output,
    parse_output_parts,
    record_launch,
    store_parts,
)
from experiments.shared.input_checks import text_problem
from runners.parsers import ParseResult

MAX_IMPORT_BYTES = MAX_OUTPUT_BYTES

# Benchmark output is text. A file picked by mistake (a screenshot of the results, the
# results as a PDF or an archive) would otherwise be stored as an "imported" run whose
# output is hundreds of kilobytes of binary garbage; it is named by its first bytes and
# refused, and anything else that is mostly not text is refused too.
BINARY_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"PK\x03\x04", "a zip archive (or an office document)"),
    (b"\xfd7zXZ\x00", "xz-compressed data"),
    (b"(\xb5/\xfd", "zstd-compressed data"),
    (b"BZh", "bzip2-compressed data"),
    (b"\x7fELF", "an ELF executable"),
    (b"SQLite format 3\x00", "an SQLite database"),
)
# Characters that text output does not hold: C0 controls other than tab, line breaks, form
# feed, backspace and escape (progress bars and colours use those), DEL, and U+FFFD (bytes
# that were not UTF-8).
_NOT_TEXT = re.compile("[\x00-\x07\x0e-\x1a\x1c-\x1f\x7f\ufffd]")
# A few such characters are tolerated (a stray byte in a log): at most this fraction.
MAX_NOT_TEXT = 0.01


def _binary_kind(head: str | bytes) -> str | None:
    """What a known binary format the first bytes (or characters, read as Latin-1 or with
    U+FFFD replacing undecodable bytes) announce, or None."""
    if isinstance(head, str):
        head = head[:32].encode("latin-1", "replace")
    for magic, kind in BINARY_MAGIC:
        if head.startswith(magic):
            return kind
        if magic[0] >= 0x80 and head.startswith(b"?" + magic[1:]):
            return kind  # the first byte was not UTF-8 and became U+FFFD
    return None


def binary_problem(data: bytes) -> str | None:
    """Why uploaded bytes are not benchmark output (a known binary format, NUL bytes, not
    UTF-8 text), or None."""
    kind = _binary_kind(data[:32])
    if kind:
        return f"is {kind}, not text output of a benchmark"
    if b"\x00" in data:
        return "holds NUL bytes: it is binary data, not text output of a benchmark"
    return not_text_problem(data.decode("utf-8", errors="replace"))


def not_text_problem(text: str) -> str | None:
    """Why ``text`` is not benchmark output (it starts like a binary format, or more than
    MAX_NOT_TEXT of its characters are control characters or undecodable bytes), or None."""
    kind = _binary_kind(text)
    if kind:
        return f"is {kind}, not text output of a benchmark"
    if not text:
        return None
    bad = len(_NOT_TEXT.findall(text))
    if bad > max(1, MAX_NOT_TEXT * len(text)):
        return (
            f"is not text: {bad} of its {len(text)} characters are control characters or "
            "bytes that are not UTF-8"
        )
    return None


def item_problem(name: str, text: str) -> str | None:
    """Why one item of an import cannot be stored (too large, a NUL character or a lone
    surrogate in its name or text, not text at all), or None. Every item of an import is
    checked."""
    chars = len(text)
    size = chars if chars > MAX_IMPORT_BYTES else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_IMPORT_BYTES:
        return f"larger than {MAX_IMPORT_BYTES // 2**20} MiB"
    problem = text_problem(name)
    if problem:
        return f"the name {problem}"
    problem = not_text_problem(text)
    if problem:
        return f"the output {problem}"
    problem = text_problem(text)
    return f"the output {problem}" if problem else None


def preview(text: str, tool: str | None = None, op: str | None = None) -> ParseResult:
    """What importing ``text`` would store, saving nothing; ParseError for unusable input."""
    return parse_output(text, tool, parse_options(op))


def preview_parts(text: str, tool: str | None = None, op: str | None = None) -> list[ParseResult]:
    """The runs importing ``text`` would store, one result each (several for an output of
    several independent measurements), saving nothing; ParseError for unusable input."""
    return parse_output_parts(text, tool, parse_options(op))


def read_telemetry(data: bytes | str) -> str:
    """An uploaded telemetry file (one beeweb-telemetry/1 document or a list of them) as the
    JSON text of a validated list, carried from the preview to the save; ValueError saying
    what is wrong (experiments.results.telemetry.validate)."""
    from experiments.results import telemetry
    from experiments.shared.input_checks import json_problem

    if len(data) > MAX_IMPORT_BYTES:
        raise ValueError("larger than 20 MiB")
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    problem = json_problem(value)
    if problem:
        raise ValueError(problem)
    docs = telemetry.validate(value if isinstance(value, list) else [value])
    return json.dumps(docs, separators=(",", ":"))


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
    telemetry_docs: list | None = None,
) -> Run:
    """``import_runs``' first run (the only one, unless the output holds several
    measurements)."""
    return import_runs(
        text,
        testbed=testbed,
        tuning_set=tuning_set,
        owner=owner,
        tool=tool,
        op=op,
        label=label,
        telemetry_docs=telemetry_docs,
    )[0]


def import_runs(
    text: str,
    *,
    testbed,
    tuning_set=None,
    owner=None,
    tool: str | None = None,
    op: str | None = None,
    label: str = "",
    telemetry_docs: list | None = None,
) -> list[Run]:
    """Store ``text`` as an imported run, then parse it; the runs stored: one per independent
    measurement the output holds, each with the whole raw text (``store.store_parts``). A
    parse failure keeps the run (and its raw text) with the error recorded, so nothing is
    lost and ``reparse`` can retry. ImportRefused for a published testbed: published study
    data accepts no runs; ValueError for telemetry with an output of several measurements
    (telemetry belongs to one run)."""
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
    runs = store_parts(run, tool)
    if telemetry_docs:
        if len(runs) > 1:
            raise ValueError(
                f"telemetry belongs to one run; this output holds {len(runs)} independent "
                "measurements"
            )
        from experiments.results import telemetry

        telemetry.store(run, telemetry_docs)
    return runs
