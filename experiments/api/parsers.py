"""Request body parsers of the API: JSON and JSON lines that refuse what cannot be stored.

DRF's own JSONParser lets a deeply nested body end in a RecursionError (a 500), accepts
``NaN``/``Infinity`` and integers of any length, and passes lone surrogates and NUL characters
on to the database, which rejects them (another 500, or on SQLite a row whose pages fail).
These parsers answer 400 with the place and the reason instead
(``experiments.input_checks``).

Most bodies are fine, and are parsed by the json module's C scanner alone, then checked once
(``json_problem``): ``input_checks.loads`` calls Python for every number of the text (a bulk
request of 500 runs holds ~35,000), which took twice as long as parsing. A body the check
refuses is parsed again by ``loads``, whose refusal names the place and reason as before.
(orjson parses faster still, but reads an integer of 2**64 or more as a float: telling those
apart cost more than it saved.)
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import APIException, ParseError

from experiments.input_checks import _BAD_ESCAPE, json_problem, loads


def fast_loads(text: str) -> Any:
    """``input_checks.loads`` (the same value, or the same BadInput), faster when the text is
    fine: parsed without a Python call per number, then checked as ``loads`` checks."""
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


class StrictJSONParser(parsers.JSONParser):
    """JSON with bounded nesting, finite numbers, 64-bit integers and storable text."""

    def parse(self, stream, media_type=None, parser_context=None):
        text = _text(stream, parser_context)
        try:
            return fast_loads(text)
        except ValueError as exc:  # BadInput is a ValueError too
            raise ParseError(f"JSON parse error - {exc}") from None


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
