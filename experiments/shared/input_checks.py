"""Text and JSON that beeweb refuses at the door, whatever view it is meant for.

PostgreSQL stores no NUL character in text or jsonb and no lone UTF-16 surrogate (``"\\ud800"``
in JSON) anywhere; on SQLite a lone surrogate is stored but cannot be encoded again, so every
page showing it fails. JSON numbers beyond a 64-bit integer, ``NaN`` and ``Infinity`` (which
Python's json module accepts) are not JSON either and no column holds them. Nesting is bounded
so that nothing downstream recurses without limit.

``RejectBadTextMiddleware`` checks the path, headers, query string and form fields of every
request (400, or 404 for a path); ``experiments.api.parsers`` checks JSON bodies; importers call
``text_problem`` on the text they store.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.http.multipartparser import MultiPartParserError

MAX_JSON_DEPTH = 32
INT_MAX = 2**63 - 1  # PostgreSQL bigint, SQLite integer
_SURROGATE = re.compile("[\ud800-\udfff]")
_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")
# Control characters (and lone surrogates) in a name, a parameter value or a matrix file;
# free text (descriptions, YAML documents) may also hold tabs and line breaks.
CONTROL_CHARS = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
CONTROL_CHARS_BUT_LINES = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
# The only way a JSON text (decoded, so holding no surrogates itself) puts a NUL or a lone
# surrogate into a string: a \u escape (a raw control character inside a string is a parse
# error). A valid surrogate pair matches too; the full check then sorts it out.
_BAD_ESCAPE = re.compile(r"\\u(?:0000|[dD][89abcdefABCDEF][0-9a-fA-F]{2})")


class BadInput(ValueError):
    """Input that cannot be stored; the message says where and why."""


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored (NUL character, lone surrogate), or None."""
    match = _BAD_CHARS.search(text)
    if match is None:
        return None
    if match.group() == "\x00":
        return "contains a NUL character, which cannot be stored"
    return "contains a lone UTF-16 surrogate (invalid Unicode), which cannot be stored"


def clean_text(text: str) -> bool:
    if text.isascii():  # (no surrogate: one C call, cheaper than the regex engine's search)
        return "\x00" not in text
    return _BAD_CHARS.search(text) is None


def _reject_constant(name: str) -> Any:
    raise BadInput(f"{name} is not a JSON number (give a finite number or null)")


def _checked_int(digits: str) -> int:
    if len(digits.lstrip("-")) > 19 or not -INT_MAX - 1 <= int(digits) <= INT_MAX:
        raise BadInput(
            f"the number {digits[:24]}{'…' if len(digits) > 24 else ''} is out of range "
            "(integers must fit in 64 bits)"
        )
    return int(digits)


def _checked_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise BadInput(f"the number {text[:24]}{'…' if len(text) > 24 else ''} is out of range")
    return value


def loads(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that refuses what cannot be stored (see the module's docstring);
    BadInput names the offending place as a JSON path (``$.params.bs``)."""
    try:
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_int=_checked_int,
            parse_float=_checked_float,
        )
    except RecursionError:
        raise BadInput(f"JSON nested deeper than {max_depth} levels") from None
    # Bytes are decoded with "surrogatepass" by json.loads: only a text's strings are known
    # clean when it has no escape that could make them otherwise.
    clean = isinstance(text, str) and _BAD_ESCAPE.search(text) is None
    problem = json_problem(value, max_depth=max_depth, strings_checked=clean)
    if problem:
        raise BadInput(problem)
    return value


def json_problem(
    value: Any,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    where: str = "$",
    strings_checked: bool = False,
) -> str | None:
    """The first place in a decoded JSON value that cannot be stored, with the reason; None
    when all is well. Walks iteratively (no recursion however deep the value is).

    ``strings_checked``: every string (and key) is known to hold neither NUL nor a lone
    surrogate (``loads`` knows it from the text), so only numbers and nesting are checked.
    A value that passes (nearly all) is walked once without building the path of every
    place; only a refused one is walked again to name the place (a bulk request of 500 runs
    holds ~30,000 values: naming each cost more than parsing the JSON)."""
    if _storable(value, max_depth, strings_checked):
        return None
    return _locate(value, max_depth, where)


def _storable(
    value: Any, max_depth: int, strings_checked: bool, float_bound: float = math.inf
) -> bool:
    """Whether ``json_problem`` finds nothing; a value of any type JSON does not decode to
    answers False, and ``_locate`` then decides. ``float_bound``: False for a float of that
    magnitude or more too (not only for NaN and the infinities)."""
    search = _BAD_CHARS.search
    low = -float_bound
    stack: list[tuple[Any, int]] = [([value], -1)]
    while stack:
        item, depth = stack.pop()
        if depth >= max_depth:
            return False
        if type(item) is dict:
            if not strings_checked:
                for key in item:
                    if type(key) is not str or search(key) is not None:
                        return False
            values = item.values()
        else:
            values = item
        for sub in values:
            kind = type(sub)
            if kind is str:
                if not strings_checked and search(sub) is not None:
                    return False
            elif kind is float:
                if not low < sub < float_bound:  # NaN, an infinity (or the bound)
                    return False
            elif kind is int:
                if not -INT_MAX - 1 <= sub <= INT_MAX:
                    return False
            elif kind is dict or kind is list:
                stack.append((sub, depth + 1))
            elif sub is not None and kind is not bool:
                return False
    return True


def _locate(value: Any, max_depth: int, where: str) -> str | None:
    """``json_problem``'s answer, found by walking ``value`` with the path of every place."""
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return f"{path}: text {problem}"
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not -INT_MAX - 1 <= item <= INT_MAX:
                return f"{path}: the integer is out of range (integers must fit in 64 bits)"
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return f"{path}: the number is not finite"
        elif isinstance(item, dict | list):
            if depth >= max_depth:
                return f"{path}: JSON nested deeper than {max_depth} levels"
            if isinstance(item, dict):
                for key, sub in item.items():
                    if isinstance(key, str):
                        problem = text_problem(key)
                        if problem:
                            return f"{path}: a key {problem}"
                    stack.append((sub, f"{path}.{key}", depth + 1))
            else:
                stack.extend((sub, f"{path}[{n}]", depth + 1) for n, sub in enumerate(item))
    return None


def _request_problem(request: HttpRequest) -> str | None:
    for key, value in request.META.items():
        # Headers (a token, a session cookie) are looked up in the database too.
        if key.startswith("HTTP_") and isinstance(value, str) and "\x00" in value:
            return f"The header {key[5:].replace('_', '-').title()} contains a NUL character."
    for name, values in request.GET.lists():
        for text in (name, *values):
            problem = text_problem(text)
            if problem:
                return f"The query parameter {name[:40]!r} {problem}."
    if request.method == "POST" and request.content_type in (
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    ):
        try:
            fields = request.POST.lists()
        except MultiPartParserError as exc:
            return f"The form data could not be read: {exc}"
        for name, values in fields:
            for text in (name, *values):
                problem = text_problem(text)
                if problem:
                    return f"The form field {name[:40]!r} {problem}."
    return None


class RejectBadTextMiddleware:
    """Answer 400 to a request whose headers, query string or form fields hold a NUL
    character (or the latter a lone surrogate), and 404 to one whose path does (no URL names
    such an object), before any view or authentication queries the database with it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not clean_text(request.path):
            return self._answer(request, 404, "Not found.")
        problem = _request_problem(request)
        if problem:
            return self._answer(request, 400, problem)
        return self.get_response(request)

    @staticmethod
    def _answer(request: HttpRequest, status: int, message: str) -> HttpResponse:
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": message}, status=status)
        if status == 400:
            return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")
        return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
