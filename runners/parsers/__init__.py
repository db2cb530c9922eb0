"""Output parsers: one pure module per tool (named in ``runners.registry``), detection of the
tool from content.

Each module in ``PARSER_MODULES`` exposes:

- ``TOOL``: the tool name (``"ior"``),
- ``detect(text: str) -> float``: confidence 0..1 that ``text`` is this tool's output,
- ``parse(text: str, **options) -> ParseResult``: a validated result, or ``ParseError``.

Modules may also expose ``parse_many(text) -> list[ParseResult]`` when one file can hold
several runs (IOR logs that wrap several invocations).
"""

from __future__ import annotations

import importlib
import inspect
from types import ModuleType

from runners import registry
from runners.parsers.base import Metric, ParseError, ParseResult

__all__ = ["Metric", "ParseError", "ParseResult", "detect_tool", "get_parser", "parse"]

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


def parse(text: str, tool: str | None = None, **options) -> ParseResult:
    """Parse ``text`` with the named tool's parser, or the detected one."""
    if not text or not text.strip():
        raise ParseError("the output is empty")
    name = tool or detect_tool(text)
    module = get_parser(name)
    # Options a parser does not take (--op for IOR, say) are not errors: drop them.
    accepted = inspect.signature(module.parse).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        options = {k: v for k, v in options.items() if k in accepted}
    result = module.parse(text, **options)
    return result.validate()
