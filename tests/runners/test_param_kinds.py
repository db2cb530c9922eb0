"""The kinds of parameters and their normal forms (runners.params; issue 25, finding 3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runners import params
from runners.parsers.base import PARAM_KINDS, PARAMS_DOC
from runners.tools import ADAPTERS
from runners.tools.base import LaunchContext


def test_every_size_flag_and_count_of_the_adapters_and_parsers_has_a_kind():
    for name in PARAMS_DOC:
        if name not in ("api", "pattern", "rw", "ops"):
            assert params.kind(name) == PARAM_KINDS[name], name
    for adapter in ADAPTERS.values():
        for p in adapter.params.values():
            if p.kind in ("size", "seconds", "bool", "int") and p.name != "ops":
                assert params.kind(p.name) == p.kind, (adapter.tool, p.name)
    assert params.kind("bs") == "size" and params.kind("rw") is None


@pytest.mark.parametrize(
    ("name", "value", "normal"),
    [
        ("transfer_size", "1m", 1048576),
        ("transfer_size", "256k", 262144),
        ("transfer_size", "1048576", 1048576),
        ("transfer_size", 1048576.0, 1048576),
        ("bs", "4K", 4096),
        ("bs", "4KiB", 4096),
        ("bs", "4 KiB", 4096),
        ("bs", " 1.5m ", 1572864),
        ("aggregate_size", 8e12, 8_000_000_000_000),
        ("direct", "True", True),
        ("direct", "yes", True),
        ("direct", 1, True),
        ("direct", "0", False),
        ("file_per_process", "off", False),
        ("runtime", "5m", 300),
        ("runtime", "30s", 30),
        ("runtime", 60.0, 60),
        ("runtime", 0.25, 0.25),
        ("numjobs", "4", 4),
        ("threads", 16.0, 16),
        # kept as given: no kind, or not readable as its kind
        ("rw", "randread", "randread"),
        ("bs", "huge", "huge"),
        ("ops", ["write", "read"], ["write", "read"]),
        ("label", "1m", "1m"),
        ("direct", None, None),
    ],
)
def test_normal_forms(name, value, normal):
    got = params.normal(name, value)
    assert got == normal and type(got) is type(normal)


def test_normalise_is_idempotent_and_keeps_unknown_names():
    given = {"bs": "4k", "direct": "yes", "tuning:client.x": "1m", "target": "t1", "n": "4"}
    once = params.normalise(given)
    assert once == {"bs": 4096, "direct": True, "tuning:client.x": "1m", "target": "t1", "n": "4"}
    assert params.normalise(once) == once
    assert params.normalise(None) is None


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("transfer_size", 1048576, "1 MiB"),
        ("transfer_size", "1m", "1 MiB"),
        ("bs", 4096, "4 KiB"),
        ("bs", 512, "512 B"),
        ("aggregate_size", 8e12, "8 TB"),
        ("file_size", 10737418240, "10 GiB"),
        ("file_size", 1572864 + 1, "1.5 MiB"),
        ("direct", True, "yes"),
        ("direct", "false", "no"),
        ("runtime", 300, "5 min"),
        ("runtime", 45, "45 s"),
        ("numjobs", 4, "4"),
        ("threads", 4.0, "4"),
        ("rw", "read", "read"),
        ("chunk_size", "524288", "512 KiB"),  # a size-like name outside the table
        ("bs", None, "—"),
    ],
)
def test_human(name, value, shown):
    assert params.human(name, value) == shown


@pytest.mark.parametrize("text", ["4k", "4K", "4096", "4 KiB", "4KiB", "4kb"])
def test_parse_reads_what_a_user_types(text):
    assert params.parse("bs", text) == 4096


def test_parse_refuses_text_that_is_not_of_the_kind_and_passes_other_names():
    with pytest.raises(ValueError):
        params.parse("bs", "big")
    assert params.parse("rw", "read") == "read"


@pytest.mark.parametrize(
    ("tool", "typed"),
    [
        ("ior", {"transfer_size": "1m", "block_size": "4m"}),
        ("fio", {"bs": "4k", "size": "8m", "direct": "yes", "runtime": "1m"}),
        ("dd", {"bs": "1m", "count": "16"}),
    ],
)
def test_the_argv_from_the_normal_form_is_the_argv_from_the_typed_spelling(tool, typed, tmp_path):
    ctx = LaunchContext(workdir=tmp_path, scratch=tmp_path / "scratch")
    adapter = ADAPTERS[tool]
    assert adapter.build(params.normalise(typed), ctx).argv == adapter.build(typed, ctx).argv


@settings(max_examples=500, deadline=None)
@given(
    st.dictionaries(
        st.one_of(st.sampled_from(sorted(params.KINDS)), st.text(max_size=3), st.integers()),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(min_value=-(2**64), max_value=2**64),
            st.floats(),
            st.sampled_from(["4k", "yes", "1m", "16", "-3", "1.5", "x", "true", " 2 "]),
            st.lists(st.integers(), max_size=2),
        ),
        max_size=6,
    )
)
def test_normalise_is_normal_of_each_value(given_params):
    """The copy without a call per value gives what ``normal`` gives for each (types too),
    in a new dict."""
    expected = {name: params.normal(name, value) for name, value in given_params.items()}
    result = params.normalise(given_params)
    assert repr(result) == repr(expected) and result is not given_params
