"""The bulk ingest's fast paths give what the plain ones give: on PostgreSQL the COPY text
built by experiments.results.ingest stores every column of every run and metric as the ORM
path (bulk_create) stores it; configuration keys computed once per configuration equal
``summaries.key_of`` of each run; the primary flags equal ``results.mark_primary``'s; the
summaries of an ingested batch equal a recomputation; JSON bodies parsed on the fast path
give ``input_checks.loads``'s value or its refusal."""

from __future__ import annotations

import json
import math
import uuid
from types import SimpleNamespace

import pytest
from django.db import connection
from django.db.models import QuerySet
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.api.parsers import fast_loads
from experiments.models import Metric, Run, RunTelemetry
from experiments.results import ingest as ingest_module
from experiments.results import summaries
from experiments.results.ingest import ingest, primary_flags
from experiments.results.store import DETAIL_KEYS, mark_primary, metric_rows, record_launch
from experiments.shared.input_checks import loads
from runners.params import KINDS, normalise
from runners.parsers.base import METRIC_UNITS, STATS
from tests.helpers.samples import sample
from tests.helpers.telemetry import documents

TEXT = 'tab\there\nnew line \\ backslash "quoted" \r caf\u00e9 \U0001f600'


def items(prefix: str, testbed) -> list[dict]:
    """A batch with every kind of item and value the writers format differently."""
    return [
        {
            "key": f"{prefix}-explicit",
            "testbed": "bench",
            "tuning_set": "base",
            "tool": "fio",
            "op": "write",
            "label": TEXT,
            "notes": TEXT,
            "tool_version": "fio-3.36",
            "command": "fio --rw=write\tx",
            "status": "succeeded",
            "exit_code": -3,
            "started_at": "2026-01-02T03:04:05.123456Z",
            "finished_at": "2026-01-02T04:04:05+02:00",
            "params": {
                "threads": 4,
                "big": 2**63 - 1,
                "neg": -(2**63),
                "f": 1e16,
                "tiny": 1e-7,
                "zero": -0.0,
                "one": 1.0,
                "yes": True,
                "none": None,
                "s": TEXT,
                "nested": {"a": [1, 2.5, None, True, {"b": "\\"}]},
            },
            "metrics": [
                {"name": "write_bw", "value": 2.5e9, "extra": {"job": "j1", "t": TEXT}},
                {"name": "write_bw", "value": 2e9},
                {"name": "write_bw", "value": 3, "iteration": 3, "source_ref": "line\t9 \\"},
                {"name": "write_lat", "value": 1e-300, "stat": "max"},
                {"name": "write_lat", "value": 5e-324, "stat": "mean"},
                {"name": "elapsed", "value": 12345678901234567890},
                # Plain metrics of every form of float text (orjson's: 1e16, not 1e+16).
                {"name": "read_bw", "value": -0.0},
                {"name": "read_iops", "value": 1e16},
                {"name": "write_iops", "value": 0.1},
                {"name": "read_lat", "value": 1e-7, "stat": "p99"},
                {"name": "read_lat", "value": 123456789.0, "stat": "mean"},
                {"name": "read_lat", "value": -1.5e299, "stat": "max"},
                {"name": "elapsed", "value": 2.2250738585072014e-308, "stat": "min"},
            ],
        },
        {
            "key": f"{prefix}-parsed",
            "testbed": str(testbed.uuid),
            "raw_output": sample("fio/fio-3.28-json-15jobs-randread-buffered-beegfs-thesis.json"),
            "params": {"site": "a"},
        },
        {
            "key": f"{prefix}-unparsable",
            "testbed": "bench",
            "tool": "ior",
            "raw_output": "hello\n\tworld\\\n",
        },
        {
            "key": f"{prefix}-telemetry",
            "testbed": "bench",
            "tool": "fio",
            "params": {"threads": 4, "f": 1e16, "s": TEXT, "one": 1.0},
            "metrics": [{"name": "write_bw", "value": 2e9}],
            "telemetry": documents(),
        },
        {"key": f"{prefix}-bare", "testbed": "bench", "tool": "dd", "metrics": []},
    ]


IGNORED_RUN = {"id", "uuid", "client_key", "created", "updated"}
IGNORED_METRIC = {"id", "run_id"}


def stored(prefix: str) -> dict[str, tuple[dict, list[dict]]]:
    """Every column of the runs with keys ``prefix-…`` and of their metrics, as read back."""
    out = {}
    for run in Run.objects.filter(client_key__startswith=f"{prefix}-"):
        columns = {
            f.attname: getattr(run, f.attname)
            for f in Run._meta.concrete_fields
            if f.attname not in IGNORED_RUN
        }
        metrics = [
            {
                f.attname: getattr(m, f.attname)
                for f in Metric._meta.concrete_fields
                if f.attname not in IGNORED_METRIC
            }
            for m in run.metrics.order_by("id")
        ]
        out[run.client_key.split("-", 1)[1]] = (columns, metrics)
    return out


def orm_create(new) -> None:
    """The reference: the rows through the ORM (model instances, bulk_create; the plain
    QuerySet's, which leaves the summaries to the ingest, as the COPY path does)."""
    fields = [f for f in Run._meta.concrete_fields if not f.primary_key]
    runs = QuerySet(Run).bulk_create(
        [Run(**{f.attname: getattr(item.run, f.attname) for f in fields}) for item, _ in new]
    )
    metrics = []
    for (item, _), run in zip(new, runs, strict=True):
        item.run.id = run.pk
        rows = item.metrics
        if rows and type(rows[0]) is tuple:
            rows = metric_rows(ingest_module._metric_dicts(rows))
        metrics += [
            Metric(
                run_id=run.pk,
                **{k: getattr(m, k) for k in ("name", "value", "unit", "stat", "iteration")},
                **{k: getattr(m, k) for k in ("primary", "extra", "source_ref")},
            )
            for m in rows
        ]
    QuerySet(Metric).bulk_create(metrics)


@pytest.mark.django_db
def test_copy_stores_what_the_orm_path_stores(alice, testbed, tuning_set, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("the COPY path is PostgreSQL's")
    by_copy = ingest(items("copy", testbed), alice)
    assert summaries.differences() == []
    monkeypatch.setattr(ingest_module, "_copy", orm_create)
    by_orm = ingest(items("orm", testbed), alice)
    assert [r["status"] for r in by_copy] == ["created"] * 5
    assert [(r["status"], r.get("metrics")) for r in by_copy] == [
        (r["status"], r.get("metrics")) for r in by_orm
    ]
    copied, created = stored("copy"), stored("orm")
    # The parsed output holds 15 stonewalled fio jobs: a run of each (issue 25), the first
    # keyed as the item, the others "#part2" to "#part15".
    parts = {f"parsed#part{n}" for n in range(2, 16)}
    assert (
        set(copied)
        == set(created)
        == {"explicit", "parsed", "unparsable", "telemetry", "bare"} | parts
    )
    for name in copied:
        (run, metrics), (expected_run, expected_metrics) = copied[name], created[name]
        assert run == expected_run, name
        assert metrics == expected_metrics, name
    explicit = copied["explicit"][0]
    assert explicit["label"] == TEXT and explicit["params"]["s"] == TEXT
    assert explicit["params"]["big"] == 2**63 - 1 and explicit["exit_code"] == -3
    assert len(copied["parsed"][1]) > 10 and not copied["parsed"][0]["parse_error"]
    assert copied["unparsable"][0]["parse_error"]
    assert copied["unparsable"][0]["raw_output"] == "hello\n\tworld\\\n"
    # Telemetry and its verdict, computed after the COPY, for either path.
    for prefix in ("copy", "orm"):
        run = Run.objects.get(client_key=f"{prefix}-telemetry")
        assert RunTelemetry.objects.filter(run=run).count() == 2
    # The runs read back whole through the API, and their summaries are right.
    assert summaries.differences() == []


@pytest.mark.django_db
def test_ids_keys_and_duplicates_in_one_batch(alice, testbed):
    """Run ids come from the table's sequence (above every earlier run's), each metric
    belongs to its own run, a key repeated in the batch or stored before is one run."""
    first = ingest([ingest_module_item(0)], alice)
    batch = [ingest_module_item(i) for i in range(1, 6)] + [
        ingest_module_item(3),
        ingest_module_item(0),
    ]
    results = ingest(batch, alice)
    assert [r["status"] for r in results] == ["created"] * 5 + ["existing"] * 2
    assert results[5]["uuid"] == results[2]["uuid"]
    assert results[6]["uuid"] == first[0]["uuid"]
    runs = {str(r.uuid): r for r in Run.objects.all()}
    assert len(runs) == 6
    earlier = runs[first[0]["uuid"]].pk
    for i, result in enumerate(results[:5], start=1):
        run = runs[result["uuid"]]
        assert run.pk > earlier and run.client_key == f"k-{i}"
        assert sorted(run.metrics.values_list("value", flat=True)) == [0.5, 1e9 + i]
        assert run.config_key == summaries.key_of(run)
    assert Metric.objects.count() == 12
    assert summaries.differences() == []


def ingest_module_item(i: int, **changes) -> dict:
    return {
        "key": f"k-{i}",
        "testbed": "bench",
        "tool": "fio",
        "params": {"threads": i % 2, "rw": "write"},
        "metrics": [
            {"name": "write_bw", "value": 1e9 + i},
            {"name": "write_lat", "value": 0.5, "stat": "mean"},
        ],
        **changes,
    }


@pytest.mark.django_db
def test_configuration_keys_are_key_of_each_run(alice, testbed, tuning_set):
    """Runs whose parameters are equal but of other types (1, 1.0, true, "1") or nested are
    keyed as ``summaries.key_of`` keys each, memo or not."""
    values = [1, 1.0, True, "1", 1, True, [1], {"a": 1}, [1], 2**63 - 1, -0.0, 0, None]
    batch = [
        ingest_module_item(i, params={"x": value, "y": "same"}, tuning_set="base" if i % 2 else "")
        for i, value in enumerate(values)
    ]
    results = ingest(batch, alice)
    assert {r["status"] for r in results} == {"created"}
    keys = {}
    for result, value in zip(results, values, strict=True):
        run = Run.objects.get(uuid=uuid.UUID(result["uuid"]))
        assert run.config_key == summaries.key_of(run), value
        keys[result["index"]] = run.config_key
    # 1 (without a tuning set, index 0) and true (index 2) are other configurations
    assert keys[0] != keys[2] and keys[0] == keys[4] and keys[2] != keys[5]
    assert keys[6] == keys[8]


@pytest.mark.django_db
def test_a_statistic_that_is_not_text_is_an_invalid_item(alice, testbed):
    """(It was a 500: a list is no key of the set of statistics.)"""
    results = ingest(
        [ingest_module_item(0, metrics=[{"name": "write_bw", "value": 1, "stat": ["mean"]}])],
        alice,
    )
    assert results[0]["status"] == "invalid"
    assert "unknown statistic" in results[0]["errors"]["metrics[0]"]
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_a_batch_failing_inside_copy_stores_nothing(alice, testbed):
    """A row PostgreSQL refuses while copying (the second run's uuid is the first's) rolls
    the whole batch back: no run, metric or summary of it stays."""
    if connection.vendor != "postgresql":
        pytest.skip("the COPY path is PostgreSQL's")
    from django.db import IntegrityError

    real = ingest_module._run
    made = []

    def colliding(defaults, values):
        row = real(defaults, values)
        if made:
            row.uuid = made[0].uuid
        made.append(row)
        return row

    ingest_module._run = colliding
    try:
        with pytest.raises(IntegrityError):
            ingest([ingest_module_item(i) for i in range(3)], alice)
    finally:
        ingest_module._run = real
    assert not Run.objects.exists() and not Metric.objects.exists()
    from experiments.models import ConfigSummary

    assert not ConfigSummary.objects.exists()


def test_the_vocabulary_needs_no_copy_escapes():
    """Explicit metrics' names, units and statistics go into COPY lines unescaped."""
    words = [*METRIC_UNITS, *METRIC_UNITS.values(), *STATS]
    assert not [w for w in words if ingest_module._COPY_SPECIAL.search(w) or w == "\\N"]


# --- Primary flags -------------------------------------------------------------------------

metric_tuples = st.lists(
    st.tuples(
        st.sampled_from(["write_bw", "read_bw", "elapsed"]),
        st.floats(allow_nan=False, allow_infinity=False),
        st.just("B/s"),
        st.sampled_from(sorted(STATS)),
        st.one_of(st.none(), st.integers(0, 3)),
        st.one_of(
            st.just({}),
            st.dictionaries(st.sampled_from([*sorted(DETAIL_KEYS)[:3], "note"]), st.integers()),
        ),
        st.just(""),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(metric_tuples)
def test_primary_flags_are_mark_primarys(metrics):
    rows = [
        SimpleNamespace(name=n, stat=s, iteration=i, extra=e, primary=None)
        for n, _, _, s, i, e, _ in metrics
    ]
    assert primary_flags(metrics) == [row.primary for row in mark_primary(rows)]


# --- JSON bodies ---------------------------------------------------------------------------

FINE = [
    "[]",
    '{"a": -0, "b": -0.0, "c": 1e-400, "d": 1.7976931348623157e308, "e": 5e-324}',
    '{"big": 9223372036854775807, "small": -9223372036854775808, "f": 1.0, "g": 1E5}',
    '["caf\\u00e9", "\\ud83d\\ude00", "\\\\u0000 is text", "tab\\tnew\\nline"]',
    '{"a": 1, "a": 2}',
    '[{"a": [[[[[[[[[[1]]]]]]]]]]}]',
    # Floats of 2**63 or more: parsed by json, not orjson (which reads big integers so).
    '{"a": 9.3e18, "b": -9223372036854775808.0, "c": 123456789012345678901234.5, "d": 1e308}',
]
REFUSED = [
    '{"n": -9223372036854775809}',
    '{"n": 123456789012345678901234567890}',
    "[1e19, 10000000000000000000]",
    '{"n": NaN}',
    '{"n": -Infinity}',
    '{"n": 1e401}',
    '{"n": 9223372036854775808}',
    '{"n": 18446744073709551616}',
    '{"n": ' + "1" * 5000 + "}",
    '{"s": "a\\u0000b"}',
    '{"s": "\\ud800"}',
    '{"\\udfff": 1}',
    "[" * 100_000 + "]" * 100_000,
    '{"a": ' * 40 + "1" + "}" * 40,
    "[1,",
    '{"a": 1,}',
    "\ufeff[1]",
]


@pytest.mark.parametrize("text", FINE)
def test_fast_loads_gives_loads_value(text):
    fast, plain = fast_loads(text), loads(text)
    assert json.dumps(fast) == json.dumps(plain)
    assert type(fast) is type(plain)


@pytest.mark.parametrize("text", REFUSED, ids=range(len(REFUSED)))
def test_fast_loads_refuses_as_loads_does(text):
    with pytest.raises(ValueError) as plain:
        loads(text)
    with pytest.raises(ValueError) as fast:
        fast_loads(text)
    assert type(fast.value) is type(plain.value)
    assert str(fast.value) == str(plain.value)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_fast_loads_is_loads(value):
    """orjson's parse (with json's where it would differ) gives loads' value or refusal."""
    text = json.dumps(value)  # NaN, Infinity, lone surrogates, big integers: refused
    try:
        plain = loads(text)
    except ValueError as exc:
        with pytest.raises(ValueError) as fast:
            fast_loads(text)
        assert (type(fast.value), str(fast.value)) == (type(exc), str(exc))
        return
    fast = fast_loads(text)
    assert json.dumps(fast) == json.dumps(plain)
    assert repr(fast) == repr(plain)  # types too: 1 and 1.0


def test_checked_json_text_is_json_dumps_for_jsonb():
    """What orjson writes for checked values reads back as what json.dumps writes."""
    value = {"f": 1e16, "t": 1e-7, "z": -0.0, "o": 1.0, "s": TEXT, "n": [None, True, 2**63 - 1]}
    text = ingest_module._checked_json_text(value)
    unescaped = text.replace("\\\\", "\x00").replace("\\t", "\t").replace("\\n", "\n")
    unescaped = unescaped.replace("\\r", "\r").replace("\x00", "\\")
    assert json.loads(unescaped) == value
    assert not math.isnan(json.loads(unescaped)["f"])


# --- Plain metrics and flat parameters -----------------------------------------------------

# Mostly valid, so that lists of plain metrics come often, with each way to be otherwise.
plain_metric = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["write_bw", "read_lat", "elapsed", "write_bw", "nope", 1, None]),
        "value": st.one_of(
            st.floats(-1e301, 1e301),
            st.integers(min_value=-(2**70), max_value=2**70),
            st.sampled_from(
                [True, None, "1", [1.0], math.nan, math.inf, 1e300, -1e300, 5e300, -2e300]
            ),
        ),
    },
    optional={
        "stat": st.sampled_from(["value", "mean", "p99", "value", "nope", None, 1, ["mean"]]),
        "unit": st.sampled_from(["B/s", "s", "IOPS", "B/s", None, 1]),
        "iteration": st.sampled_from([None, 0, 2]),
        "extra": st.sampled_from([{}, {"job": "a"}]),
        "source_ref": st.sampled_from(["", "line 3"]),
        "other": st.just(1),
    },
)
not_a_metric = st.sampled_from([1, None, "x", [], ["name"]])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(plain_metric, plain_metric, plain_metric, not_a_metric), max_size=4))
def test_plain_metrics_are_checked_as_each_metric_is(raw):
    """``_plain_metrics``' tuples are those of the check of each metric, and a list it
    declines is left to that check (which words the error)."""
    fast = ingest_module.Item(0, {})
    checked = ingest_module._metrics(fast, raw)
    real = ingest_module._plain_metrics
    try:
        ingest_module._plain_metrics = lambda raw: None
        slow = ingest_module.Item(0, {})
        expected = ingest_module._metrics(slow, raw)
    finally:
        ingest_module._plain_metrics = real
    assert (repr(checked), fast.errors) == (repr(expected), slow.errors)


flat_values = st.dictionaries(
    st.one_of(st.text(max_size=3), st.sampled_from(["\x00", "a\ud800"])),
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**64), max_value=2**64),
        st.floats(),
        st.text(max_size=3),
        st.sampled_from(["\x00", "\udfff", "tab\t"]),
        st.lists(st.integers(), max_size=2),
        st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
        st.just(object()),
    ),
    max_size=5,
)


@settings(max_examples=500, deadline=None)
@given(flat_values)
def test_flat_parameters_are_checked_as_json_problem_checks(params):
    if ingest_module._flat_normalised(params) is not None:
        assert ingest_module._unstorable(params, "params") is None
    else:  # nested, a float of 2**63 or more (left to json_problem), or refused
        nested = any(type(v) in (dict, list, object) for v in params.values())
        large = any(type(v) is float and abs(v) >= 2.0**63 for v in params.values())
        assert nested or large or ingest_module._unstorable(params, "params") is not None


def test_flat_parameters_refused_with_their_words():
    for params, words in [
        ({"a": "x\x00"}, "params.a: text contains a NUL character"),
        ({"a\ud800": 1}, "params: a key contains a lone UTF-16 surrogate"),
        ({"a": 2**63}, "params.a: the integer is out of range"),
        ({"a": math.nan}, "params.a: the number is not finite"),
    ]:
        assert ingest_module._flat_normalised(params) is None
        item = ingest_module.Item(0, {"testbed": "x", "tool": "fio", "params": params})
        ingest_module._validate(item)
        assert item.errors["params"].startswith(words), item.errors


# --- The collector's pause -----------------------------------------------------------------


def test_gc_paused_restores_the_collector():
    import gc

    assert gc.isenabled()
    with ingest_module.gc_paused():
        assert not gc.isenabled()
        with ingest_module.gc_paused():  # another request's, in another thread
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError), ingest_module.gc_paused():
        1 / 0  # noqa: B018
    assert gc.isenabled()
    gc.disable()  # left as it was found
    try:
        with ingest_module.gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=20))
def test_float_texts_read_back_as_the_floats(values):
    """What PostgreSQL reads (as Python's float does: correctly rounded) is each value,
    the sign of zero too; one text per value."""
    texts = ingest_module._float_texts(values)
    assert len(texts) == len(values)
    for text, value in zip(texts, values, strict=True):
        assert float(text) == value and math.copysign(1, float(text)) == math.copysign(1, value)
        assert not set(text) & set("\t\n\\,")


@settings(max_examples=500, deadline=None)
@given(st.text(), json_values)
def test_copy_escapes_are_the_four_specials(text, value):
    """COPY text: backslash, tab, newline and carriage return escaped, nothing else; JSON
    texts (json's and orjson's) hold no raw control character, so only backslashes."""
    assert ingest_module._escaped(text) == text.translate(ingest_module._COPY_ESCAPES)
    for dumped in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
        escaped = dumped.translate(ingest_module._COPY_ESCAPES)
        if not set(dumped) & {"\t", "\n", "\r"}:
            assert ingest_module._escaped_json(dumped) == escaped
    try:
        dumped = ingest_module.orjson.dumps(value).decode()
    except TypeError:  # (a lone surrogate, a big integer)
        return
    assert ingest_module._escaped_json(dumped) == dumped.translate(ingest_module._COPY_ESCAPES)


# --- Launch text, UUIDs, text fields (issue 17: fewer Python steps per run) -----------------


@pytest.mark.parametrize("checked", [True, False])
def test_launch_text_is_the_launch_formatted(checked):
    """The launch column built from the parameters' text is the launch's own text, for
    every launch; one that is not record_launch's of these parameters is formatted."""
    fmt = ingest_module._checked_json_text if checked else ingest_module._json_text
    params = {"threads": 4, "f": 1e16, "s": TEXT, "nested": {"a": [1, None, True]}}
    row = SimpleNamespace(params=params)
    cases = [
        record_launch({}, params, {}, metrics_given=True),
        record_launch({}, params, {}),
        record_launch({}, params, {"op": "write"}, metrics_given=True),
        record_launch({}, {}, {}, metrics_given=True),  # other parameters than the row's
        record_launch({"params": {"a": 1}}, params, {}),
        {"params": params, "parse_options": {}, "metrics_given": True},  # other order
        {"parse_options": {}, "params": params, "metrics_given": False},
        {"parse_options": [], "params": params},
        {"parse_options": {}, "params": params, "other": 1},
        {"params": params},
    ]
    for launch in cases:
        texts = ingest_module._launch_texts((launch,), [row.params], [fmt(params)], fmt)
        assert texts == [fmt(launch)], launch
    empty = SimpleNamespace(params={})
    launch = record_launch({}, empty.params, {}, metrics_given=True)
    texts = ingest_module._launch_texts((launch,), [empty.params], [fmt({})], fmt)
    assert texts == [fmt(launch)]


parameter_names = st.one_of(st.sampled_from(sorted(KINDS)), st.text(max_size=8))
parameter_values = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(),
    st.sampled_from([2.0**63, -(2.0**63), -0.0, 1.0]),
    st.booleans(),
    st.none(),
    st.text(max_size=8),
    st.sampled_from(["4k", "4 KiB", "1.5m", "yes", "off", "30s", "5m", "-3", "4", "\x00"]),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=1000, deadline=None)
@given(st.dictionaries(parameter_names, parameter_values, max_size=6))
def test_flat_normalised_is_normalise_of_flat_storable_parameters(params):
    """One pass for both: ``normalise`` of flat parameters that ``_unstorable`` accepts
    (values in the same types), None for the others; never the given dict itself."""
    flat = all(
        value is None
        or type(value) in (str, bool)
        or (type(value) is int and -(2**63) <= value < 2**63)
        or (type(value) is float and -(2.0**63) < value < 2.0**63)
        for value in params.values()
    )
    storable = flat and ingest_module._unstorable(params, "params") is None
    found = ingest_module._flat_normalised(params)
    if not storable:
        assert found is None
        return
    expected = normalise(params)
    assert found is not params
    assert list(found) == list(expected)
    assert [(type(v), v) for v in found.values()] == [(type(v), v) for v in expected.values()]


def test_uuid4_texts_are_uuid4s():
    texts = ingest_module._uuid4_texts(2000)
    assert len(set(texts)) == 2000
    uuids = [uuid.UUID(text) for text in texts]
    assert [str(u) for u in uuids] == texts
    assert {(u.version, u.variant) for u in uuids} == {(4, uuid.RFC_4122)}
    # Every variant digit comes: the two bits below the variant's are random.
    assert {text[19] for text in texts} == set("89ab")
    assert ingest_module._uuid4_texts(0) == []


def _texts_in_order(data: dict) -> tuple[dict, dict]:
    """The text fields of an item and their errors as each field checked in turn gives."""
    item = ingest_module.Item(0, data)
    clean = {}
    for name, limit in ingest_module.TEXT_LIMITS:
        value = data.get(name)
        clean[name] = "" if value in (None, "") else ingest_module._text(item, name, limit)
    return clean, item.errors


text_field = st.one_of(
    st.none(),
    st.just(""),
    st.text(max_size=5),
    st.sampled_from(["fio", "dd", "x" * 201, "a\x00", "\udc00", 1, ["a"], True]),
)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.sampled_from([n for n, _ in ingest_module.TEXT_LIMITS]), text_field))
def test_text_fields_are_checked_as_each_in_turn(data):
    """Only the given text fields are looked at first; any problem has them all checked in
    their order: the same values, the same errors in the same order."""
    item = ingest_module.Item(0, dict(data, params={}, metrics=[]))
    clean = ingest_module._validate(item)
    expected, errors = _texts_in_order(data)
    # (_validate's defaults of these two, and a raw output that is not text, blanked)
    for name in ("key", "status", "raw_output"):
        expected.pop(name), clean.pop(name)
    assert {n: clean[n] for n in expected} == expected
    assert [(n, e) for n, e in item.errors.items() if n in errors] == list(errors.items())
