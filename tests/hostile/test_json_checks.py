"""The fast path of ``experiments.shared.input_checks`` (a value walked without naming every place;
a JSON text's strings trusted when it has no escape that could make them unstorable) must
refuse exactly what the full walk refuses, with the same message."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.shared.input_checks import INT_MAX, BadInput, _locate, json_problem, loads

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet=st.sampled_from(["a", "é", "\x00", "\ud800", "\udfff", "\n", "\\", '"']))
)
KEYS = st.text(alphabet=st.sampled_from(["k", "\x00", "\udc00", "x"]), max_size=3)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=VALUES, depth=st.integers(min_value=0, max_value=5))
def test_the_fast_walk_answers_as_the_full_one(value, depth):
    assert json_problem(value, max_depth=depth) == _locate(value, depth, "$")


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=VALUES)
def test_loads_refuses_what_the_full_walk_refuses(value):
    try:
        text = json.dumps(value, ensure_ascii=False)
    except ValueError:
        return
    escaped = json.dumps(value)  # every non-ASCII character as a \\u escape
    for body in (text, escaped):
        try:
            body.encode("utf-8")
        except UnicodeEncodeError:
            continue  # a lone surrogate written raw: not a text a request can carry
        expected = None
        try:
            parsed = json.loads(body)
        except ValueError:
            continue
        expected = _locate(parsed, 32, "$")
        big = any(
            isinstance(v, int) and not isinstance(v, bool) and not -INT_MAX - 1 <= v <= INT_MAX
            for v in _leaves(parsed)
        )
        odd = any(isinstance(v, float) and v - v != 0.0 for v in _leaves(parsed))
        if big or odd:
            with pytest.raises(BadInput):  # refused by the number hooks already
                loads(body)
            continue
        if expected is None:
            assert loads(body) == parsed
        else:
            with pytest.raises(BadInput) as refused:
                loads(body)
            assert str(refused.value) == expected


def _leaves(value):
    if isinstance(value, dict):
        for sub in value.values():
            yield from _leaves(sub)
    elif isinstance(value, list):
        for sub in value:
            yield from _leaves(sub)
    else:
        yield value


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"a": "x\\u0000"}', "$.a: text contains a NUL character"),
        ('{"a": ["\\uD800"]}', "$.a[0]: text contains a lone UTF-16 surrogate"),
        ('{"\\u0000": 1}', "$: a key contains a NUL character"),
        ('{"a": "\\\\u0000"}', None),  # a backslash, then "u0000": plain text
        ('{"a": "\\ud83d\\ude00"}', None),  # a surrogate pair: one emoji
        ("[" * 33 + "]" * 33, "JSON nested deeper than 32 levels"),
    ],
)
def test_escapes_and_nesting(body, message):
    if message is None:
        assert loads(body) == json.loads(body)
    else:
        with pytest.raises(BadInput) as refused:
            loads(body)
        assert message in str(refused.value)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_clean_text_is_no_nul_and_no_lone_surrogate(text):
    from experiments.shared.input_checks import _BAD_CHARS, clean_text

    assert clean_text(text) == (_BAD_CHARS.search(text) is None)
    assert clean_text(text + "\x00") is False
    assert clean_text("abc\ud800") is False and clean_text("abc") is True
