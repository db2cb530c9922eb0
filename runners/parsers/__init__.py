"""Output parsers: one pure module per tool (named in ``runners.registry``), detection of the
tool from content.

Each module in ``PARSER_MODULES`` exposes:

- ``TOOL``: the tool name (``"ior"``),
- ``detect(text: str) -> float``: confidence 0..1 that ``text`` is this tool's output,
- ``parse(text: str, **options) -> ParseResult``: a validated result, or ``ParseError``.

Modules may also expose ``parse_many(text) -> list[ParseResult]`` when one file can hold
several runs (IOR logs that wrap several invocations), and ``parse_parts(text, **options)
-> list[ParseResult]`` when one output can hold several independent measurements (fio jobs
in different stonewall groups, IOR runs or tests, mdtest runs, elbencho sweep steps or
appended runs, dd invocations): one result per measurement,
each with its own parameters and metrics and ``extra["part"]`` (``base.number_parts``).
``parse_parts`` here gives them (one result for an output of one measurement) and
``parse(text, part=N)`` the N-th; beeweb stores each part as a run of its own.
"""

from __future__ import annotations

import importlib
import inspect
from types import ModuleType

from runners import registry
from runners.parsers.base import (
    Metric,
    ParseError,
    ParseResult,
    describe_parts,
    summarise_parts,
)

__all__ = [
    "Metric",
    "ParseError",
    "ParseResult",
    "describe_parts",
    "detect_tool",
    "get_parser",
    "parse",
    "parse_parts",
    "summarise_parts",
]

# Parsers that are not a benchmark tool's: the topology of a BeeGFS file system.
TOPOLOGY_PARSERS = {"beegfs": "runners.parsers.beegfs"}
_MODULES: dict[str, str] = {
    **{t.name: t.parser for t in registry.parsed() if t.parser},
    **TOPOLOGY_PARSERS,
}
# Names get_parser() takes, in detection order.
PARSER_MODULES = list(_MODULES)


def get_parser(tool: str) -> ModuleType:
    """The parser module for ``tool``; ParseError for an unknown name."""
    name = tool.strip().lower().replace("-", "_")
    if name not in _MODULES:
        known = ", ".join(PARSER_MODULES)
        raise ParseError(f"unknown tool {tool!r} (known: {known})")
    return importlib.import_module(_MODULES[name])


def detect_tool(text: str) -> str:
    """Name of the tool that most likely printed ``text``; ParseError when none fits."""
    best, best_score = None, 0.0
    for name in PARSER_MODULES:
        module = get_parser(name)
        score = module.detect(text)
        if score > best_score:
            best, best_score = name, score
    if best is None or best_score < 0.3:
        raise ParseError("could not recognise the tool that wrote this output")
    return best


def _accepted(function, options: dict) -> dict:
    """Options a parser does not take (--op for IOR, say) are not errors: dropped."""
    accepted = inspect.signature(function).parameters
    if any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        return options
    return {k: v for k, v in options.items() if k in accepted}


def parse(text: str, tool: str | None = None, part: int | None = None, **options) -> ParseResult:
    """Parse ``text`` with the named tool's parser, or the detected one; with ``part``, the
    part of that index (``parse_parts``) only."""
    if not text or not text.strip():
        raise ParseError("the output is empty")
    name = tool or detect_tool(text)
    if part is not None:
        parts = parse_parts(text, name, **options)
        if isinstance(part, bool) or not isinstance(part, int) or not 0 <= part < len(parts):
            held = describe_parts(parts) or "one measurement"
            raise ParseError(f"part {part!r} not found: the output holds {held}", tool=name)
        return parts[part]
    module = get_parser(name)
    result = module.parse(text, **_accepted(module.parse, options))
    return result.validate()


def parse_parts(text: str, tool: str | None = None, **options) -> list[ParseResult]:
    """The independent measurements ``text`` holds, one validated result each, in the
    order of the output; one result (``parse``'s) when it holds one."""
    if not text or not text.strip():
        raise ParseError("the output is empty")
    name = tool or detect_tool(text)
    module = get_parser(name)
    split = getattr(module, "parse_parts", None)
    if split is None:
        return [parse(text, name, **options)]
    return [result.validate() for result in split(text, **_accepted(split, options))]
