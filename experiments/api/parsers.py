"""Request body parsers of the API: JSON and JSON lines that refuse what cannot be stored.

DRF's own JSONParser lets a deeply nested body end in a RecursionError (a 500), accepts
``NaN``/``Infinity`` and integers of any length, and passes lone surrogates and NUL characters
on to the database, which rejects them (another 500, or on SQLite a row whose pages fail).
These parsers answer 400 with the place and the reason instead
(``experiments.shared.input_checks``).

Most bodies are fine, and are parsed by orjson, then checked once (``json_problem``'s walk):
``input_checks.loads`` calls Python for every number of the text (a bulk request of 500 runs
holds ~35,000), which took twice as long as parsing, and json's C scanner takes 2.8 ms for
such a request where orjson takes 1.2 ms. orjson reads an integer of 2**64 or more as a float
(json: an int, which the check refuses): a body with a float of 2**63 or more, or one orjson
refuses, is parsed by json's scanner instead (found by the same walk: no regex over the
text); a body the check refuses is parsed again by ``loads``, whose refusal names the place
and reason as before.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import APIException, ParseError

from experiments.shared.input_checks import (
    _BAD_ESCAPE,
    MAX_JSON_DEPTH,
    _storable,
    json_problem,
    loads,
)

# The magnitude from which orjson's float may be an integer of the text (orjson reads an
# integer beyond 64 bits as a float, json as an int: its range check then refuses it).
_INT_AS_FLOAT = 2.0**63


def fast_loads(text: str) -> Any:
    """``input_checks.loads`` (the same value, or the same BadInput), faster when the text is
    fine: parsed by orjson, then checked as ``loads`` checks. orjson reads what json reads,
    the same way, but for integers beyond 64 bits (floats) and what it refuses (NaN, lone
    surrogates, …): a text with a float of 2**63 or more, or one orjson refuses, is parsed
    by ``_json_loads`` instead, whose value or refusal is ``loads``'."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _json_loads(text)
    if _storable(value, MAX_JSON_DEPTH, _BAD_ESCAPE.search(text) is None, _INT_AS_FLOAT):
        return value
    return _json_loads(text)


def _json_loads(text: str) -> Any:
    """``input_checks.loads``: parsed by json's C scanner (no Python call per number), then
    checked; a text the check refuses is parsed again by ``loads`` to word the refusal."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return loads(text)  # raises, saying where and why
    if json_problem(value, strings_checked=_BAD_ESCAPE.search(text) is None) is None:
        return value
    return loads(text)  # refuses what the check found (NaN, 1e400, a 20-digit integer, …)


class RequestTooLarge(APIException):
    status_code = 413
    default_detail = "The request body is too large."
    default_code = "request_too_large"


def _text(stream, parser_context) -> str:
    """The body as text, refused (413) above the view's ``max_body_bytes`` (else
    DATA_UPLOAD_MAX_MEMORY_SIZE), before it is read when Content-Length says so."""
    context = parser_context or {}
    encoding = context.get("encoding", settings.DEFAULT_CHARSET)
    limit = getattr(context.get("view"), "max_body_bytes", None)
    limit = limit or settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if limit is None:
        data = stream.read()
    else:
        request = context.get("request")
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0) if request else 0
        except ValueError:
            length = 0
        data = stream.read(limit + 1) if length <= limit else b""
        if length > limit or len(data) > limit:
            raise RequestTooLarge(
                f"The body is larger than {limit:,} bytes, the most one request may hold: "
                "split it into several requests."
            )
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        raise ParseError(f"the body is not {encoding}") from None


def _checked_loads(text: str) -> Any:
    """``fast_loads``, its refusal a 400 (ParseError) naming the place and the reason."""
    try:
        return fast_loads(text)
    except ValueError as exc:  # BadInput is a ValueError too
        raise ParseError(f"JSON parse error - {exc}") from None


class StrictJSONParser(parsers.JSONParser):
    """JSON with bounded nesting, finite numbers, 64-bit integers and storable text."""

    def parse(self, stream, media_type=None, parser_context=None):
        return _checked_loads(_text(stream, parser_context))


class UncheckedJSON:
    """A body orjson parsed that is not checked yet (``BulkJSONParser``): ``value``, and
    ``check``, which raises the ParseError ``StrictJSONParser`` would raise for the body, or
    returns (the body is storable; ``value`` is what ``StrictJSONParser`` gives for it)."""

    __slots__ = ("text", "value")

    def __init__(self, value: Any, text: str) -> None:
        self.value, self.text = value, text

    def check(self) -> None:
        _checked_loads(self.text)


class BulkJSONParser(StrictJSONParser):
    """``StrictJSONParser`` whose check is left to the bulk ingest
    (``experiments.results.ingest.ingest``'s ``check``): the ingest checks every field of an
    item it stores, and when each item's own checks cover each of its values (nearly always:
    known fields, texts checked for NUL and lone surrogates, flat parameters and plain
    metrics whose numbers are finite and below 2**63 in magnitude, no telemetry), the walk
    over the whole body finds nothing more; otherwise the ingest calls ``check`` before it
    stores anything, so every body ``StrictJSONParser`` refuses is refused the same way.
    (The walk was ~1/10 of the Python CPU of a request of 500 runs; bench/RESULTS.md.) A
    body orjson refuses is parsed as ``StrictJSONParser`` parses it."""

    def parse(self, stream, media_type=None, parser_context=None):
        text = _text(stream, parser_context)
        try:
            return UncheckedJSON(orjson.loads(text), text)
        except orjson.JSONDecodeError:
            return _checked_loads(text)


class JSONLinesParser(parsers.BaseParser):
    """One JSON object per line (``application/x-ndjson``), for streaming large batches; each
    line is checked as ``StrictJSONParser`` checks a body."""

    media_type = "application/x-ndjson"

    def parse(self, stream, media_type=None, parser_context=None):
        items = []
        for number, line in enumerate(_text(stream, parser_context).split("\n"), 1):
            if line.strip():
                try:
                    items.append(fast_loads(line))
                except ValueError as exc:  # BadInput is a ValueError too
                    raise ParseError(f"line {number}: {exc}") from None
        return items
