"""Findings 9 and 10 of issue 11: bad input answers 4xx with a message and stores nothing.

Each case below answered 500 before (or stored half of a request): deeply nested JSON, a
401-digit number, NaN/Infinity, lone surrogates and NUL characters in request bodies, query
strings, form fields and share keys; ``param:-1`` as a comparison dimension (SQLite); an API
launch of a matrix that cannot expand; a browser import whose second item fails or exceeds the
per-item limit; bulk requests beyond what the server can process within its timeout.

Everything runs on the database DATABASE_URL names (PostgreSQL in CI, SQLite with
``make test``): PostgreSQL refuses NUL characters and lone surrogates, SQLite rejects
``$[-1]`` as a JSON path, so both matter. Every case asserts a 4xx, a message, and unchanged
row counts. ``test_compare_parameters_never_answer_5xx`` is the property test over the
comparison's query parameters (page and API); tests/api/test_schemathesis.py fuzzes the whole
API with negative data too. ``-s`` prints how many inputs each tried.
"""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.models import (
    HardwareProfile,
    Matrix,
    Metric,
    Node,
    Report,
    Run,
    ShareLink,
    Testbed,
    TuningSet,
)
from experiments.results import ingest as ingest_module
from tests.helpers.api import token_client
from tests.helpers.samples import sample

pytestmark = pytest.mark.django_db

MODELS = (HardwareProfile, Node, Testbed, TuningSet, Matrix, Run, Metric, Report, ShareLink)


def counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in MODELS}


@contextmanager
def nothing_stored():
    before = counts()
    yield
    assert counts() == before, "a refused request stored something"


def message(response) -> str:
    """The answer's text (JSON or not), for asserting that it says why."""
    return response.content.decode("utf-8", errors="replace")


@pytest.fixture
def api(alice):
    return token_client(alice)


@pytest.fixture
def anonymous():
    return Client()


# --- Request bodies: JSON and JSON lines --------------------------------------------------

BIG_INT = "1" + "0" * 400
DEEP = "[" * 100_000 + "]" * 100_000  # RecursionError in json.loads
NESTED_40 = '{"a": ' * 40 + "1" + "}" * 40  # parses, but deeper than anything beeweb reads
WRITE_BW = '[{"name": "write_bw", "value": 1e9}]'


def item(**fields: str) -> str:
    """One bulk item as JSON text; values are JSON text inserted as given."""
    parts = {"testbed": '"bench"', "tool": '"fio"', "key": '"k1"', "metrics": WRITE_BW} | fields
    return "{" + ", ".join(f'"{k}": {v}' for k, v in parts.items()) + "}"


def params(text: str) -> str:
    return item(params=text)


def metric_value(text: str) -> str:
    return item(metrics='[{"name": "write_bw", "value": ' + text + "}]")


SURROGATE = json.dumps(chr(0xD800))  # the JSON text "\ud800"
BODY_CASES = {
    "deeply nested array": (DEEP, "nested deeper"),
    "deep object inside params": ("[" + params(NESTED_40) + "]", "nested deeper"),
    "401-digit integer in params": ("[" + params('{"n": ' + BIG_INT + "}") + "]", "out of range"),
    "401-digit metric value": ("[" + metric_value(BIG_INT) + "]", "out of range"),
    "1e401 in params": ("[" + params('{"n": 1e401}') + "]", "out of range"),
    "NaN in params": ("[" + params('{"n": NaN}') + "]", "NaN"),
    "Infinity as a metric value": ("[" + metric_value("-Infinity") + "]", "Infinity"),
    "lone surrogate in a label": ("[" + item(label=SURROGATE) + "]", "surrogate"),
    "lone surrogate as a params key": ("[" + params("{" + SURROGATE + ": 1}") + "]", "surrogate"),
    "lone surrogate in raw output": (
        "[" + item(metrics="null", raw_output=json.dumps("fio " + chr(0xDBFF))) + "]",
        "surrogate",
    ),
    "NUL in a label": ("[" + item(label=json.dumps("a\x00b")) + "]", "NUL"),
}


@pytest.mark.parametrize("case", sorted(BODY_CASES))
def test_bulk_json_body_is_refused_with_a_message(api, testbed, case):
    body, reason = BODY_CASES[case]
    with nothing_stored():
        response = api.post("/api/runs/bulk/", body, content_type="application/json")
    assert response.status_code == 400, (case, response.status_code, message(response)[:300])
    assert reason in message(response)


@pytest.mark.parametrize("case", sorted(BODY_CASES))
def test_bulk_json_lines_are_refused_with_the_line_number(api, testbed, case):
    body, reason = BODY_CASES[case]
    if body.startswith("[{"):
        body = body[1:-1]  # one item per line
    lines = item(key='"ok"') + "\n" + body + "\n"
    with nothing_stored():
        response = api.post("/api/runs/bulk/", lines, content_type="application/x-ndjson")
    assert response.status_code == 400, (case, response.status_code, message(response)[:300])
    assert "line 2" in message(response) and reason in message(response)


@pytest.mark.parametrize("case", sorted(BODY_CASES))
def test_single_run_post_is_refused(api, testbed, case):
    body, reason = BODY_CASES[case]
    if body.startswith("[{"):
        body = body[1:-1]
    with nothing_stored():
        response = api.post("/api/runs/", body, content_type="application/json")
    assert response.status_code == 400, (case, response.status_code, message(response)[:300])
    assert reason in message(response)


OBJECT_CASES = [
    ("/api/testbeds/", '{"name": ' + DEEP + "}"),
    ("/api/testbeds/", '{"name": "x", "storage_links": ' + BIG_INT + "}"),
    ("/api/testbeds/", '{"name": ' + json.dumps(chr(0xD800)) + "}"),
    ("/api/testbeds/", '{"name": "x", "notes": NaN}'),
    ("/api/hardware/", '{"name": "x", "sockets": ' + BIG_INT + "}"),
    ("/api/hardware/", '{"name": "x", "clock_ghz": 1e999}'),
    ("/api/tuning-sets/", '{"name": ' + json.dumps("t" + chr(0xDFFF)) + "}"),
    ("/api/matrices/", '{"name": "m", "tool": "fio", "fixed_params": {"bs": Infinity}}'),
    ("/api/matrices/", '{"name": "m", "tool": "fio", "fixed_params": ' + NESTED_40 + "}"),
]


@pytest.mark.parametrize(("path", "body"), OBJECT_CASES)
def test_object_bodies_are_refused(api, testbed, path, body):
    with nothing_stored():
        response = api.post(path, body, content_type="application/json")
    assert response.status_code == 400, (path, body[:80], message(response)[:300])
    assert "JSON parse error" in message(response)


def test_form_encoded_api_body_with_nul_is_refused(api):
    with nothing_stored():
        response = api.post("/api/testbeds/", {"name": "a\x00b"}, format="multipart")
    assert response.status_code == 400 and "NUL" in message(response)


# --- Query strings, form fields and paths -------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "/compare/?metric=write_bw&x=param:-1",
        "/compare/?metric=write_bw&series=param:0",
        "/compare/?metric=write_bw&f=param:-1:4",
        "/compare/?metric=write_bw&y=tuning:-1&chart=heatmap",
        "/api/compare/?metric=write_bw&x=param:-1",
        "/api/compare/?metric=write_bw&f=param:-1:4",
        "/compare/print/?metric=write_bw&x=param:-1",
        "/compare/export.csv?metric=write_bw&x=param:-1",
    ],
)
def test_bad_dimension_names_answer_400(alice_client, raid, url):
    response = alice_client.get(url)
    assert response.status_code == 400, (url, message(response)[:300])
    assert "-1" in message(response) or "param:0" in message(response)


@pytest.mark.parametrize(
    "url",
    [
        "/compare/?metric=write_bw&f=arch:%00",
        "/compare/?metric=write_bw&f=param:threads:4%00",
        "/compare/?metric=write_bw&baseline=%00",
        "/compare/?metric=write_bw&fk=arch&fv=%00",
        "/api/compare/?metric=write_bw&f=arch:%00",
        "/api/compare/?metric=write%00_bw",
        "/runs/?q=%00",
        "/runs/?testbed=%00",
        "/api/runs/?testbed=%00",
        "/api/testbeds/?name=%00",
        "/api/metrics/?name=%00",
        "/tuning/diff/?a=%00",
        "/compare/?%00=1",
    ],
)
def test_nul_in_a_query_string_answers_400(alice_client, raid, url):
    response = alice_client.get(url)
    assert response.status_code == 400, (url, message(response)[:300])
    assert "NUL" in message(response)


@pytest.mark.parametrize(
    "url",
    [
        f"/runs/?page={BIG_INT}",
        f"/api/runs/?page_size={BIG_INT}",
        f"/api/testbeds/?page={BIG_INT}&page_size={BIG_INT}",
        f"/api/metrics/?page_size=-{BIG_INT}",
        f"/api/compare/?metric=write_bw&from={BIG_INT}-01-01",
        f"/compare/?metric=write_bw&f=param:threads:{BIG_INT}",
        f"/api/compare/?metric=write_bw&x=param:threads&baseline={BIG_INT}",
    ],
)
def test_huge_numbers_in_query_strings_never_answer_5xx(alice_client, raid, url):
    response = alice_client.get(url)
    assert response.status_code < 500, (url, message(response)[:300])


def test_nul_in_a_comparison_spec_from_anywhere_is_an_error():
    from experiments.comparison import ComparisonSpec

    spec = ComparisonSpec.from_query({"metric": "write_bw", "f": "arch:x86\x00", "x": "arch"})
    assert spec.filters == [] and any("NUL" in e for e in spec.errors)
    spec = ComparisonSpec.from_query({"metric": "write_bw", "baseline": "a\ud800"})
    assert spec.baseline == "" and any("surrogate" in e for e in spec.errors)


@pytest.mark.parametrize(
    "path",
    [
        "/s/%00/",
        "/s/" + "a" * 30 + "%00/",
        "/s/" + "a" * 30 + "%00/print/",
        "/s/" + "a" * 30 + "%00/export.csv",
        "/s/" + "%C3%A9" * 30 + "/",
    ],
)
def test_share_keys_with_nul_or_other_characters_are_404_for_anyone(anonymous, path):
    response = anonymous.get(path)
    assert response.status_code == 404, (path, message(response)[:200])


def test_nul_in_form_fields_answers_400(anonymous, alice_client, testbed):
    with nothing_stored():
        login = anonymous.post("/login/", {"username": "alice\x00", "password": "x"})
        created = alice_client.post("/testbeds/new/", {"name": "x\x00y", "fabric": "ethernet"})
        imported = alice_client.post(
            "/runs/import/",
            {"testbed": str(testbed.uuid), "text": "dd output\x00", "action": "preview"},
        )
    for response in (login, created, imported):
        assert response.status_code == 400 and "NUL" in message(response)


def test_nul_in_a_header_answers_400(anonymous):
    """The token and the session cookie are looked up in the database (PostgreSQL refuses
    the query); some WSGI servers pass a NUL in a header through."""
    with nothing_stored():
        token = anonymous.get("/api/testbeds/", HTTP_AUTHORIZATION="Token abc\x00def")
        cookie = anonymous.get("/runs/", HTTP_COOKIE="sessionid=abc\x00def")
    for response in (token, cookie):
        assert response.status_code == 400 and "NUL" in message(response)


def _concrete(pattern: str) -> str | None:
    """A path matching one URL pattern (route or regex), every parameter a UUID."""
    import re

    if "format" in pattern:
        return None  # DRF's ".json" suffix variants: the same views
    path = re.sub(r"<(?:\w+:)?\w+>", UUID, pattern)
    path = re.sub(r"\(\?P<\w+>[^)]*\)", UUID, path)
    path = path.replace("^", "").replace("$", "").replace("\\Z", "").replace("\\.", ".")
    return "/" + path.replace("/?", "/")


UUID = "3fa85f64-5717-4562-b3fc-2c963f66afa6"


def test_every_url_refuses_nul_in_query_strings_and_form_fields(alice_client):
    """Every URL pattern beeweb serves (admin and API included), signed in: a NUL in the
    query string or in a posted form field answers 400 before any view runs."""
    from django.urls import URLResolver, get_resolver, resolve
    from django.urls.exceptions import Resolver404

    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            else:
                yield prefix + str(p.pattern)

    paths = set()
    for pattern in walk(get_resolver().url_patterns):
        path = _concrete(pattern)
        if path is None:
            continue
        try:
            resolve(path)
        except Resolver404:
            continue
        paths.add(path)
    statuses: dict[int, int] = {}
    with nothing_stored():
        for path in sorted(paths):
            for response in (
                alice_client.get(f"{path}?q=%00&page=1"),
                alice_client.get(f"{path}?%ED%A0%80=x&name=a%00b"),
                alice_client.post(path, {"name": "x\x00", "csrfmiddlewaretoken": "x"}),
            ):
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                assert response.status_code == 400, (path, response.status_code)
    sent = sum(statuses.values())
    print(f"\nNUL probe: {len(paths)} URLs, {sent} requests, {statuses.get(400, 0)} answered 400")
    assert len(paths) > 150


# --- Matrix launch through the API --------------------------------------------------------


def test_api_launch_of_a_matrix_that_cannot_expand_is_400_with_its_message(api, alice, testbed):
    # The testbed has no benchmark directory: no cell can be placed.
    matrix = Matrix.objects.create(
        owner=alice,
        name="nowhere",
        tool="fio",
        fixed_params={"size": "8m", "bs": "1m"},
        axes=[{"param": "rw", "values": ["write", "read"]}],
    )
    matrix.testbeds.set([testbed])
    with nothing_stored():
        response = api.post(f"/api/matrices/{matrix.uuid}/launch/")
    assert response.status_code == 400, message(response)[:300]
    assert "Nothing was launched" in message(response) and "benchmark directory" in message(
        response
    )
    matrix.refresh_from_db()
    assert matrix.launched_at is None


# --- Browser import: all or nothing, the size limit on every item -------------------------


def _save_request(testbed, items: list[tuple[str, str]]) -> dict:
    return {
        "action": "save",
        "testbed": str(testbed.uuid),
        "tuning_set": "",
        "tool": "",
        "op": "",
        "label": "",
        "item_name": [name for name, _ in items],
        "item_text": [text for _, text in items],
    }


def test_import_save_checks_the_size_of_every_item(alice_client, testbed, settings):
    from experiments.results.importing import MAX_IMPORT_BYTES

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 64 * 2**20
    fio = sample("fio/fio-3.6-json-randread-4k-qd1-ceph.json")
    huge = fio + " " * (MAX_IMPORT_BYTES + 1 - len(fio))
    with nothing_stored():
        response = alice_client.post(
            "/runs/import/", _save_request(testbed, [("a.json", fio), ("b.json", huge)])
        )
        page = alice_client.get(response.url)
    assert response.status_code == 302
    assert "Nothing was imported" in message(page) and "b.json: larger than 20 MiB" in message(page)


def test_import_save_is_all_or_nothing(alice_client, testbed, monkeypatch):
    """A failure while storing the second item (here: the database refusing it) leaves no
    run of the first behind."""
    from django.db import DataError

    from experiments.results import importing
    from experiments.views import importing as views

    real = importing.import_runs
    calls = []

    def failing_second(text, **kwargs):
        calls.append(kwargs["label"])
        if len(calls) == 2:
            raise DataError("the database refused the second run")
        return real(text, **kwargs)

    monkeypatch.setattr(views, "import_runs", failing_second)
    fio = sample("fio/fio-3.6-json-randread-4k-qd1-ceph.json")
    with nothing_stored(), pytest.raises(DataError):
        alice_client.post("/runs/import/", _save_request(testbed, [("a", fio), ("b", fio)]))
    assert calls == ["a", "b"]


def test_import_save_stores_every_item_when_all_are_good(alice_client, testbed):
    fio = sample("fio/fio-3.6-json-randread-4k-qd1-ceph.json")
    response = alice_client.post(
        "/runs/import/", _save_request(testbed, [("a", fio), ("b", fio), ("c", fio)])
    )
    assert response.status_code == 302
    assert Run.objects.filter(testbed=testbed).count() == 3


def test_uploaded_file_with_a_nul_byte_is_refused_at_preview(alice_client, testbed):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("out.txt", b"1+0 records in\x00")
    with nothing_stored():
        response = alice_client.post(
            "/runs/import/", {"testbed": str(testbed.uuid), "files": [upload]}
        )
    assert response.status_code == 200  # the form again, with the reason
    assert "out.txt holds NUL bytes: it is binary data" in message(response)


# --- Bulk ingest limits -------------------------------------------------------------------


def test_bulk_refuses_more_items_than_the_limit_with_413(api, testbed):
    items = [json.loads(item(key=f'"k{i}"')) for i in range(ingest_module.MAX_ITEMS + 1)]
    with nothing_stored():
        response = api.post("/api/runs/bulk/", items, format="json")
    assert response.status_code == 413
    assert f"at most {ingest_module.MAX_ITEMS} runs per request" in message(response)


def test_bulk_refuses_a_body_above_the_byte_limit_with_413(api, testbed):
    raw = "x" * (ingest_module.MAX_REQUEST_BYTES // 2)
    items = [json.loads(item(key=f'"k{i}"', metrics="null")) | {"raw_output": raw} for i in (1, 2)]
    with nothing_stored():
        response = api.post("/api/runs/bulk/", items, format="json")
    assert response.status_code == 413
    assert f"{ingest_module.MAX_REQUEST_BYTES:,} bytes" in message(response)


def test_bulk_refuses_too_many_explicit_metrics_with_413(api, testbed, monkeypatch):
    monkeypatch.setattr(ingest_module, "MAX_METRICS", 10)
    items = [json.loads(item(key=f'"k{i}"')) for i in range(11)]
    with nothing_stored():
        response = api.post("/api/runs/bulk/", items, format="json")
    assert response.status_code == 413 and "at most 10 explicit metrics" in message(response)


def test_bulk_at_the_limits_is_accepted(api, testbed):
    items = [json.loads(item(key=f'"k{i}"')) for i in range(ingest_module.MAX_ITEMS)]
    response = api.post("/api/runs/bulk/", items, format="json")
    assert response.status_code == 200 and response.json()["created"] == ingest_module.MAX_ITEMS


# --- Property test over the comparison's parameters ---------------------------------------

TEXT = st.text(
    alphabet=st.characters(codec=None, exclude_categories=()),  # NUL and surrogates too
    max_size=30,
)
DIMENSION = st.one_of(
    st.sampled_from(["arch", "cpu", "raid", "testbed", "tuning", "tool", "hw:cores", "source"]),
    st.builds(lambda s: f"param:{s}", TEXT),
    st.builds(lambda s: f"tuning:{s}", TEXT),
    st.builds(lambda s: f"hw:{s}", TEXT),
    TEXT,
)
QUERY = st.fixed_dictionaries(
    {},
    optional={
        "metric": st.lists(st.one_of(st.sampled_from(["write_bw", "read_iops"]), TEXT), max_size=3),
        "x": DIMENSION,
        "y": DIMENSION,
        "series": DIMENSION,
        "baseline": TEXT,
        "f": st.lists(st.builds(lambda d, v: f"{d}:{v}", DIMENSION, TEXT), max_size=3),
        "tool": st.lists(TEXT, max_size=2),
        "testbed": st.lists(st.one_of(st.uuids().map(str), TEXT), max_size=2),
        "from": TEXT,
        "to": TEXT,
        "norm": st.one_of(st.sampled_from(["server", "client", "core"]), TEXT),
        "chart": st.one_of(st.sampled_from(["line", "bar", "heatmap"]), TEXT),
        "err": TEXT,
        "reps": TEXT,
        "fk": DIMENSION,
        "fv": TEXT,
    },
)
PAGES = ["/compare/", "/api/compare/", "/compare/print/", "/compare/export.json"]


def _encode(query: dict) -> str:
    """The query string as a browser or client would send it: UTF-8, percent-encoded; a lone
    surrogate goes out as its 3 raw bytes (not valid UTF-8)."""
    from urllib.parse import quote

    pairs = []
    for key, value in query.items():
        for v in value if isinstance(value, list) else [value]:
            k = quote(key.encode("utf-8", "surrogatepass"), safe="")
            pairs.append(f"{k}={quote(v.encode('utf-8', 'surrogatepass'), safe='')}")
    return "&".join(pairs)


def test_compare_parameters_never_answer_5xx(raid, alice):
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    statuses: dict[int, int] = {}

    @settings(
        max_examples=150,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(query=QUERY, page=st.sampled_from(PAGES))
    def probe(query, page):
        url = f"{page}?{_encode(query)}"
        response = client.get(url)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        assert response.status_code < 500, (url, message(response)[:500])

    probe()
    tried = sum(statuses.values())
    refused = sum(n for code, n in statuses.items() if 400 <= code < 500)
    print(f"\ncomparison parameters: {tried} URLs tried, {refused} answered 4xx, {statuses}")
    assert tried >= 150 and refused > 0


@pytest.mark.parametrize(
    "instant",
    [
        "0728-10-28T05:52:15-17:28",  # schemathesis: PostgreSQL refuses offsets beyond 15:59
        "2026-01-01T00:00:00+23:59",
        "0001-01-01T00:00:00+17:00",  # before year 1 in UTC
        "9999-12-31T23:59:59-12:00",  # after year 9999 in UTC
        "not a date",
    ],
)
@pytest.mark.parametrize("path", ["/api/runs/", "/api/reports/"])
def test_date_filters_with_odd_offsets_never_answer_5xx(api, path, instant):
    answer = api.get(path, {"created_before": instant, "created_after": instant})
    assert answer.status_code in (200, 400), answer.content
