"""The bulk ingest's body check (``experiments.api.parsers.BulkJSONParser``): the walk over
the whole body is skipped only when every item's own checks looked at each of its values,
and then it would have found nothing; any body ``StrictJSONParser`` refuses is refused by
the bulk endpoint with the same answer, and nothing of it is stored."""

from __future__ import annotations

import copy
import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.exceptions import ParseError

from experiments.api.parsers import UncheckedJSON, fast_loads
from experiments.models import Metric, Run
from experiments.results import ingest as ingest_module


def _item(i: int) -> dict:
    return {
        "key": f"check-{i}",
        "testbed": "bench",
        "tuning_set": "base",
        "tool": "fio",
        "label": f"run {i}",
        "params": {"threads": 4, "bs": "4k", "direct": True, "ratio": 0.5, "rw": "write"},
        "metrics": [
            {"name": "write_bw", "value": 1e9 + i},
            {"name": "write_lat", "value": 0.001, "stat": "mean", "unit": "s"},
        ],
    }


# Values the walk refuses (or that orjson reads otherwise than json), and values it accepts
# that only the slower checks look at.
HOSTILE = st.sampled_from(
    [
        2**63,
        2**64,
        -(2**63) - 1,
        10**20,
        1e19,
        -1e300,
        1e300,
        2.0**63,
        float("nan"),
        float("inf"),
        "a\x00b",
        "\udc00",
        {"nested": [1, {"deep": [2**70]}]},
        [[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]],
        {"a": "\x00"},
        None,
        True,
        "",
        7,
        0.25,
        "fine",
        {"cpu": 1},
        [],
    ]
)
PLACES = st.sampled_from(
    [
        ("params", "threads"),
        ("params", "new"),
        ("metrics", 0, "value"),
        ("metrics", 1, "extra"),
        ("metrics", 0, "iteration"),
        ("metrics", 1, "source_ref"),
        ("label",),
        ("notes",),
        ("exit_code",),
        ("started_at",),
        ("unknown",),
        ("telemetry",),
        ("tool",),
        ("metrics",),
        ("params",),
    ]
)


def _put(item: dict, place: tuple, value) -> None:
    """A copy of ``value`` at ``place`` in ``item``, where an earlier mutation left a way
    there (a copy: HOSTILE's lists and dicts are shared by every example, and a mutation
    into one of them would build a cycle that later examples meet)."""
    target = item
    for step in place[:-1]:
        if type(step) is int:
            if type(target) is not list or len(target) <= step:
                return
        elif type(target) is not dict or step not in target:
            return
        target = target[step]
    last = place[-1]
    if type(target) is (list if type(last) is int else dict) and (
        type(last) is str or len(target) > last
    ):
        target[last] = copy.deepcopy(value)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), PLACES, HOSTILE), max_size=4))
def test_items_covered_only_where_the_walk_finds_nothing(mutations):
    """Whenever each item is covered (the ingest then calls no check), the parser's check
    accepts the body and gives the value orjson gave."""
    body = [_item(i) for i in range(4)]
    for index, place, value in mutations:
        _put(body[index], place, value)
    text = json.dumps(body)  # NaN, Infinity, big integers, lone surrogates as they come
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return  # BulkJSONParser parses such a body as StrictJSONParser does
    items = [ingest_module.Item(i, d) for i, d in enumerate(value)]
    for item in items:
        ingest_module._validate(item)
    if all(item.covered and not item.errors for item in items):
        assert repr(fast_loads(text)) == repr(value)


REFUSED = [
    # (where, the value's JSON text)
    ("params", '{"threads": 100000000000000000000}'),
    ("params", '{"threads": 9223372036854775808}'),
    ("label", '"a\\u0000b"'),
    ("metrics", '[{"name": "write_bw", "value": 100000000000000000000}]'),
    ("metrics", '[{"name": "write_bw", "value": 1, "extra": {"x": 18446744073709551616}}]'),
    ("unknown", "[" * 40 + "1" + "]" * 40),
    ("telemetry", '{"a": "\\u0000"}'),
]


@pytest.mark.django_db
@pytest.mark.parametrize("where,value", REFUSED)
def test_a_body_the_strict_parser_refuses_is_refused_alike(api, testbed, tuning_set, where, value):
    items = [json.dumps(_item(i)) for i in range(3)]
    bad = json.dumps({k: v for k, v in _item(3).items() if k != where})
    bad = bad[:-1] + f', "{where}": {value}}}'
    text = "[" + ", ".join([*items, bad]) + "]"
    with pytest.raises(ValueError) as refused:
        fast_loads(text)
    response = api.generic("POST", "/api/runs/bulk/", text, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"detail": f"JSON parse error - {refused.value}"}
    assert not Run.objects.exists() and not Metric.objects.exists()


@pytest.mark.django_db
def test_refused_before_the_request_is_too_large_or_not_a_list(api, testbed, settings):
    """The check comes first, as the parser's did: 400 for the value, not 413 or the
    ingest's own 400."""
    bad = [_item(i) for i in range(ingest_module.MAX_ITEMS + 1)]
    text = json.dumps(bad)[:-1] + ', {"label": "\\u0000"}]'
    response = api.generic("POST", "/api/runs/bulk/", text, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"].startswith("JSON parse error - ")
    response = api.generic(
        "POST", "/api/runs/bulk/", '{"label": "\\u0000"}', content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith("JSON parse error - ")
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_a_covered_body_is_stored_without_the_check(api, testbed, tuning_set, monkeypatch):
    def refuse(self):
        raise AssertionError("checked")

    monkeypatch.setattr(UncheckedJSON, "check", refuse)
    response = api.post("/api/runs/bulk/", [_item(i) for i in range(3)])
    assert response.status_code == 200 and response.json()["created"] == 3
    # An item whose values only the slower checks look at has the body checked.
    item = dict(_item(9), params={"nested": {"a": 1}})
    with pytest.raises(AssertionError, match="checked"):
        api.post("/api/runs/bulk/", [item])


def test_unchecked_json_check_raises_the_parsers_error():
    with pytest.raises(ParseError) as refused:
        UncheckedJSON(None, '[{"a": 100000000000000000000}]').check()
    with pytest.raises(ValueError) as plain:
        fast_loads('[{"a": 100000000000000000000}]')
    assert str(refused.value.detail) == f"JSON parse error - {plain.value}"
