"""Shared property checks: whatever the input, a parser returns a result or raises ParseError.

Each test module keeps its own ``@given``/``@settings`` and draws its inputs; these functions
only run the parser and make the assertions, so every tool is held to the same rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from runners.parsers.base import ParseError, ParseResult

Parse = Callable[[str], ParseResult]

# Replacements for numbers in a sample: overflow, nan/inf, placeholders and garbage.
WEIRD_NUMBERS = st.sampled_from(
    ["1e999", "nan", "-", "0", "9" * 400, "-1", "inf", "NA", "1.2.3", "", "x", "1e308"]
)
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")


def check_only_parse_error(parse: Parse, text: str) -> None:
    """``parse(text)`` may return anything or raise ParseError, but no other exception."""
    try:
        parse(text)
    except ParseError:
        pass


def check_truncated(parse: Parse, text: str, cut: int, *, needs_metrics: bool = False) -> None:
    """Parse ``text[:cut]``: only ParseError may escape; with ``needs_metrics`` a result that
    does parse must hold at least one metric."""
    try:
        result = parse(text[:cut])
    except ParseError:
        return
    if needs_metrics:
        assert result.metrics


def check_shuffled(parse: Parse, lines: list[str], picked: list[str]) -> None:
    """Sample lines drawn in any order and number raise only ParseError.

    ``lines`` is the pool ``picked`` was drawn from; every picked line must come from it.
    """
    assert set(picked) <= set(lines)
    check_only_parse_error(parse, "\n".join(picked))


def check_mangled(parse: Parse, text: str, data: Any, max_picks: int = 30) -> None:
    """Replace up to ``max_picks`` numbers of ``text`` by WEIRD_NUMBERS (drawn from hypothesis
    ``data``); the parser must still raise only ParseError."""
    spans = [m.span() for m in _NUMBER_RE.finditer(text)]
    picks = data.draw(st.lists(st.integers(0, len(spans) - 1), max_size=max_picks, unique=True))
    for index in sorted(picks, reverse=True):
        start, end = spans[index]
        text = text[:start] + data.draw(WEIRD_NUMBERS) + text[end:]
    check_only_parse_error(parse, text)
