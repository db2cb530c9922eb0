"""Findings 3, 4 and 5 of issue 11: hostile matrix input from two non-staff colleagues.

3. A 1 KB YAML file of nested aliases ("billion laughs") wrote 480 MB into the database; a
   NUL byte in imported YAML answered 500 on PostgreSQL; YAML skipped the API's parameter
   checks. Now every path (page form, API, YAML on the page and in ``launch_matrix``) goes
   through ``experiments.matrices.validation.validate_matrix`` and the YAML reader is bounded.
4. The exclusion rule ``9 ** 9 ** 9 > 1`` pinned web workers; now it is refused at once.
5. A run parameter named ``items`` (mdtest's) made /runs/, the run page and the matrix page
   answer 500 for everyone; templates now iterate mappings with the ``pairs`` filter.
"""

from __future__ import annotations

import html
import re
import tracemalloc
from contextlib import contextmanager

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from experiments.matrices.axes import MatrixError
from experiments.matrices.expansion import expand
from experiments.matrices.files import MAX_YAML_ALIASES, MAX_YAML_BYTES, from_yaml, parse_yaml
from experiments.matrices.preview import plan
from experiments.matrices.rules import Rule, compile_rule, compile_rules, evaluate_rule
from experiments.models import Matrix, Run, Testbed, TestbedNode

pytestmark = pytest.mark.django_db

# "Refused at once" is measured as the memory the refusal allocated, not as time (which
# depends on the machine and its load): the attacks refused here cost hundreds of megabytes
# when carried out (480 MB of billion laughs; 9 ** 9 ** 9 has 370 million digits), their
# refusal a Django request's worth.
LITTLE = 32 * 2**20  # bytes


@contextmanager
def little_work():
    """The block allocates at most LITTLE bytes at its peak (tracemalloc)."""
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        yield
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not tracing:
            tracemalloc.stop()
    assert peak < LITTLE, f"{peak / 2**20:.0f} MiB allocated"


@pytest.fixture
def bob_bench(bob, tmp_path):
    """bob's own testbed (he operates it), sharing no node with alice's."""
    from experiments.models import Node

    node = Node.objects.create(owner=bob, hostname="bobnode")
    tb = Testbed.objects.create(owner=bob, name="bobbench", benchmark_dir=str(tmp_path))
    TestbedNode.objects.create(testbed=tb, node=node, client=True)
    return tb


@pytest.fixture
def alice_api(alice):
    api = APIClient()
    api.force_authenticate(alice)
    return api


def billion_laughs(testbed: str = "bench") -> str:
    """Nine levels of nine aliases each: 9**9 (387 million) strings from under 1 KB."""
    lines = ["name: laughs", "tool: fio", f"testbeds: [{testbed}]", "axes:"]
    lines.append("  l0: &l0 [" + ", ".join(["lol"] * 9) + "]")
    for level in range(1, 9):
        lines.append(f"  l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _form(testbed, **overrides) -> dict:
    data = {
        "name": "sweep",
        "tool": "fio",
        "launch_mode": "single",
        "tasks_per_node": 1,
        "testbeds": [testbed.pk],
        "repetitions": 1,
        "timeout_s": 600,
        "params_text": "size = 16m",
        "axes_text": "rw = write, read",
        "exclusions_text": "",
    }
    data.update(overrides)
    return data


def _api(testbed, **overrides) -> dict:
    data = {
        "name": "sweep",
        "tool": "fio",
        "testbeds": [str(testbed.uuid)],
        "repetitions": 1,
        "fixed_params": {"size": "16m"},
        "axes": [{"param": "rw", "values": ["write", "read"]}],
        "exclusions": [],
    }
    data.update(overrides)
    return data


def _yaml(extra: str = "", params: str = "{size: 16m}", exclude: str = "[]") -> str:
    return (
        "name: sweep\ntool: fio\ntestbeds: [bench]\nrepetitions: 1\n"
        f"params: {params}\naxes: {{rw: [write, read]}}\nexclude: {exclude}\n{extra}"
    )


def _page_text(response) -> str:
    return html.unescape(response.content.decode())


# --- Finding 3: YAML aliases, size, control characters ------------------------------------


# Whichever bound trips first: the expanded size or the number of aliases.
REFUSED_LAUGHS = re.compile(
    rf"expands to more than \d+ values|more than {MAX_YAML_ALIASES} aliases"
)


def test_billion_laughs_is_under_1_kb():
    text = billion_laughs()
    assert len(text.encode()) < 1024
    assert text.count("*l") > MAX_YAML_ALIASES


def test_billion_laughs_refused_by_the_import_page(alice_client, bench):
    text = billion_laughs()
    url = reverse("experiments:matrix_import")
    for payload in (
        {"file": SimpleUploadedFile("laughs.yaml", text.encode(), "application/yaml")},
        {"text": text},
    ):
        with little_work():
            response = alice_client.post(url, payload)
        assert response.status_code == 400
        assert REFUSED_LAUGHS.search(_page_text(response))
    assert not Matrix.objects.exists() and not Run.objects.exists()


def test_billion_laughs_refused_by_launch_matrix(alice, bench, tmp_path, capsys):
    path = tmp_path / "laughs.yaml"
    path.write_text(billion_laughs())
    with little_work(), pytest.raises(SystemExit) as exit_info:
        call_command("launch_matrix", str(path), "--owner", "alice")
    assert exit_info.value.code == 2
    assert REFUSED_LAUGHS.search(capsys.readouterr().err)
    assert not Matrix.objects.exists() and not Run.objects.exists()


def test_the_api_takes_no_yaml(alice_api, bench):
    response = alice_api.post("/api/matrices/", billion_laughs(), content_type="application/yaml")
    assert response.status_code == 415
    assert not Matrix.objects.exists()


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "name: &n x\ndescription: [" + ", ".join(["*n"] * (MAX_YAML_ALIASES + 1)) + "]\n",
            f"more than {MAX_YAML_ALIASES} aliases",
        ),
        # An alias of a big list, used a few times, still expands past the bound.
        (
            "name: x\ntool: fio\ntestbeds: [bench]\naxes:\n  a: &a ["
            + ", ".join(str(i) for i in range(1000))
            + "]\n  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            + "  c: [*b, *b, *b, *b, *b, *b]\n",
            "expands to more than",
        ),
        ("name: x\ndescription: " + "y" * 10_001 + "\n", "longer than 10000"),
        ("name: x\nparams: {size: [" + ", ".join(["1"] * 1001) + "]}\n", "more than 1000"),
        ("name: x\naxes: " + "[" * 20 + "]" * 20 + "\n", "nested deeper than"),
        ('name: "a\\0b"\ntool: fio\n', "NUL character"),
        ('name: "a\\x07b"\ntool: fio\n', "control character"),
        ('name: "\\ud800"\ntool: fio\n', "control character|not valid YAML"),
        ("name: x\n1: y\n", "not text"),
        ("name: x\nparams: {size: .nan}\n", "not a finite number"),
        ("name: x\nparams: {size: !!binary aGVsbG8=}\n", "type bytes"),
        ("name: x\nrepetitions: " + "9" * 30 + "\n", "64 bits"),
        ("name: x\nrepetitions: " + "9" * 5000 + "\n", "out of range"),
    ],
)
def test_oversized_or_unstorable_yaml_is_refused(alice, bench, text, message):
    with little_work(), pytest.raises(MatrixError, match=message):
        from_yaml(text, alice)
    assert not Matrix.objects.exists()


def test_yaml_file_size_is_bounded(alice, bench):
    text = _yaml("description: " + "x" * 9000 + "\n")
    padding = "#" + "x" * 200 + "\n"
    text += padding * (MAX_YAML_BYTES // len(padding))
    with pytest.raises(MatrixError, match="larger than 256 KiB"):
        parse_yaml(text)


def test_dates_stay_text(alice, bench):
    matrix = from_yaml(_yaml("description: 2024-01-01\n").replace("sweep", "2024"), alice)
    assert matrix.description == "2024-01-01" and matrix.name == "2024"


@pytest.mark.parametrize(
    "upload",
    [b"name: a\x00b\ntool: fio\ntestbeds: [bench]\n", b'name: "a\\0b"\ntool: fio\n'],
    ids=["raw NUL byte", "escaped NUL"],
)
def test_nul_in_yaml_is_a_4xx_and_stores_nothing(alice_client, alice, bench, tmp_path, upload):
    response = alice_client.post(
        reverse("experiments:matrix_import"),
        {"file": SimpleUploadedFile("nul.yaml", upload, "application/yaml")},
    )
    assert response.status_code == 400
    assert "NUL" in _page_text(response)
    pasted = alice_client.post(reverse("experiments:matrix_import"), {"text": upload.decode()})
    assert 400 <= pasted.status_code < 500
    path = tmp_path / "nul.yaml"
    path.write_bytes(upload)
    with pytest.raises(SystemExit) as exit_info:
        call_command("launch_matrix", str(path), "--owner", "alice")
    assert exit_info.value.code == 2
    assert not Matrix.objects.exists() and not Run.objects.exists()


# --- One validation path ------------------------------------------------------------------


INVALID = [
    # (form fields, API fields, YAML text, the message all three give)
    (
        {"params_text": "size = 16m\nbs = banana"},
        {"fixed_params": {"size": "16m", "bs": "banana"}},
        _yaml(params="{size: 16m, bs: banana}"),
        "bs: expected a size such as 4k, 1m or 2g, got 'banana'",
    ),
    (
        {"axes_text": "rw = write, read\nnumjobs = 1, 0"},
        {
            "axes": [
                {"param": "rw", "values": ["write", "read"]},
                {"param": "numjobs", "values": [1, 0]},
            ]
        },
        _yaml().replace("{rw: [write, read]}", "{rw: [write, read], numjobs: [1, 0]}"),
        "numjobs: 0 is below the minimum 1",
    ),
    (
        {"params_text": "size = 16m\nblocksize = 1m"},
        {"fixed_params": {"size": "16m", "blocksize": "1m"}},
        _yaml(params="{size: 16m, blocksize: 1m}"),
        "fio has no parameter 'blocksize'",
    ),
    (
        {"params_text": "size = 16m\ndirectory = ../../etc"},
        {"fixed_params": {"size": "16m", "directory": "../../etc"}},
        _yaml(params="{size: 16m, directory: ../../etc}"),
        "directory: '../../etc' leaves the benchmark directory",
    ),
    (
        {"launch_mode": "mpi"},
        {"launch_mode": "mpi"},
        _yaml("launch_mode: mpi\n"),
        "fio cannot run in mpi mode",
    ),
]


@pytest.mark.parametrize("form, api, text, message", INVALID)
def test_the_same_invalid_definition_gets_the_same_error_everywhere(
    alice_client, alice_api, alice, bench, form, api, text, message
):
    page = alice_client.post(reverse("experiments:matrix_new"), _form(bench, **form))
    assert page.status_code == 200 and message in _page_text(page)
    response = alice_api.post("/api/matrices/", _api(bench, **api), format="json")
    assert response.status_code == 400 and message in str(response.json()), response.json()
    with pytest.raises(MatrixError) as info:
        from_yaml(text, alice)
    assert message in str(info.value)
    assert not Matrix.objects.exists()


def test_a_valid_definition_is_accepted_everywhere(alice_client, alice_api, alice, bench):
    page = alice_client.post(reverse("experiments:matrix_new"), _form(bench, name="page"))
    assert page.status_code == 302
    assert (
        alice_api.post("/api/matrices/", _api(bench, name="api"), format="json").status_code == 201
    )
    from_yaml(_yaml().replace("sweep", "yaml"), alice)
    defined = {m.name: (m.fixed_params, m.axes) for m in Matrix.objects.all()}
    assert defined["page"] == defined["api"] == defined["yaml"]


def test_a_list_parameter_is_a_value_only_where_the_tool_takes_a_list(
    alice_client, alice_api, alice, bench
):
    text = (
        "name: net\ntool: qperf\ntestbeds: [bench]\nrepetitions: 1\n"
        "params: {server: 10.0.0.2, tests: [tcp_bw, tcp_lat], time: 2}\n"
    )
    matrix = from_yaml(text, alice)
    assert matrix.fixed_params["tests"] == ["tcp_bw", "tcp_lat"]
    form = alice_client.get(reverse("experiments:matrix_edit", args=[matrix.uuid]))
    assert "tests = tcp_bw, tcp_lat" in _page_text(form)
    api = _api(bench, tool="qperf", axes=[], fixed_params={"server": "h", "tests": ["tcp_bw"]})
    assert alice_api.post("/api/matrices/", api, format="json").status_code == 201
    listed = alice_api.post(
        "/api/matrices/", _api(bench, fixed_params={"size": ["1m"]}), format="json"
    )
    assert listed.status_code == 400 and "not a number or a word" in str(listed.json())
    missing = alice_api.post("/api/matrices/", _api(bench, tool="qperf", axes=[]), format="json")
    assert missing.status_code == 400 and "server: is required" in str(missing.json())


def test_api_partial_update_is_validated_as_a_whole(alice_api, bench):
    url = (
        "/api/matrices/"
        + alice_api.post("/api/matrices/", _api(bench), format="json").json()["uuid"]
        + "/"
    )
    bad = alice_api.patch(url, {"exclusions": ["blocksize > 1"]}, format="json")
    assert bad.status_code == 400 and "unknown name 'blocksize'" in str(bad.json())
    ok = alice_api.patch(url, {"exclusions": ["size == '16m' and rw == 'read'"]}, format="json")
    assert ok.status_code == 200, ok.json()


def test_cells_are_bounded_before_anything_is_stored(alice_api, bench, settings):
    settings.MATRIX_MAX_RUNS = 500
    axes = [
        {"param": "numjobs", "range": {"start": 1, "stop": 1000, "scale": "linear"}},
        {"param": "iodepth", "values": [1, 2]},
    ]
    response = alice_api.post("/api/matrices/", _api(bench, axes=axes), format="json")
    assert response.status_code == 400
    assert "2000 cells" in str(response.json()["axes"])
    four_hundred = alice_api.post(
        "/api/matrices/",
        _api(bench, axes=[axes[1], {"param": "bs", "values": ["4k", "1m"]}], repetitions=100),
        format="json",
    )
    assert four_hundred.status_code == 201  # 4 cells x 100 = 400 runs
    runs = alice_api.post(
        "/api/matrices/", _api(bench, axes=[axes[1]], repetitions=100), format="json"
    )
    assert runs.status_code == 201  # 2 cells x 100 = 200 runs
    settings.MATRIX_MAX_RUNS = 150
    refused = alice_api.post(
        "/api/matrices/", _api(bench, axes=[axes[1]], repetitions=100), format="json"
    )
    assert refused.status_code == 400 and "200 runs exceed" in str(refused.json())


@pytest.mark.parametrize(
    "overrides",
    [
        {"axes": "rw"},
        {"axes": [1]},
        {"axes": [{"param": 1, "values": [1]}]},
        {"axes": [{"param": "rw", "values": "write"}]},
        {"axes": [{"param": "rw", "values": [[1]]}]},
        {"axes": [{"param": "numjobs", "range": {"start": "a", "stop": 2}}]},
        {"axes": [{"param": "numjobs", "range": {"start": 1, "stop": 10**30}}]},
        {"axes": [{"param": f"p{i}", "values": [1]} for i in range(17)]},
        {"axes": [{"param": "tuning:nosuch.key", "values": [1]}]},
        {"fixed_params": []},
        {"fixed_params": {"bs": {"a": 1}}},
        {"fixed_params": {"bs": None}},
        {"exclusions": {"rule": "rw"}},
        {"exclusions": [1]},
        {"exclusions": ["numjobs > 1"] * 21},
        {"repetitions": 0},
        {"timeout_s": -1},
        {"tasks_per_node": 5000},
        {"name": ""},
        {"tool": "rm"},
        {"launch_mode": "shell"},
    ],
)
def test_malformed_definitions_are_a_400(alice_api, bench, overrides):
    response = alice_api.post("/api/matrices/", _api(bench, **overrides), format="json")
    assert response.status_code == 400, response.content[:300]
    assert not Matrix.objects.exists()


def test_texts_are_bounded(alice_api, bench):
    long_name = alice_api.post("/api/matrices/", _api(bench, name="n" * 161), format="json")
    assert long_name.status_code == 400 and "name" in long_name.json()
    control = alice_api.post("/api/matrices/", _api(bench, name="a\x07b"), format="json")
    assert control.status_code == 400 and "control characters" in str(control.json())
    value = alice_api.post(
        "/api/matrices/", _api(bench, fixed_params={"size": "1" * 5000}), format="json"
    )
    assert value.status_code == 400 and "longer than 4096" in str(value.json())
    assert not Matrix.objects.exists()


# --- Finding 4: exclusion rules bound magnitudes and time ---------------------------------

HEAVY = "9 ** 9 ** 9 > 1"


def test_power_tower_is_refused_quickly_by_form_api_and_yaml(alice_client, alice_api, alice, bench):
    with little_work():
        page = alice_client.post(
            reverse("experiments:matrix_new"), _form(bench, exclusions_text=HEAVY)
        )
        api = alice_api.post("/api/matrices/", _api(bench, exclusions=[HEAVY]), format="json")
        with pytest.raises(MatrixError, match="beyond") as info:
            from_yaml(_yaml(exclude=f'["{HEAVY}"]'), alice)
    assert (
        page.status_code == 200
        and "9 ** 9 ** 9: exponent 387420489 is beyond ±64" in _page_text(page)
    )
    assert api.status_code == 400 and "beyond" in str(api.json()["exclusions"])
    assert "exclude" in str(info.value)
    assert not Matrix.objects.exists()


@pytest.mark.parametrize(
    "rule, message",
    [
        ("2 ** 65 > 1", "beyond"),
        ("2 ** 100000 > numjobs", "beyond"),
        ("numjobs ** 65 > 1", "exponent 65"),
        ("numjobs > 18446744073709551617", "beyond"),
        ("numjobs > 1e300", "beyond"),
        ("'ab' * 100000000 == rw", "arithmetic needs numbers"),
        ("[1] * 10 == rw", "arithmetic needs numbers"),
        ("numjobs > 1 / 0", "division by zero"),
        ("numjobs > " + " + ".join(["1"] * 40), "more than 64 parts"),
        ("numjobs > " + "1" * 600, "longer than 500"),
        ("numjobs > 'x" + "y" * 300 + "'", "text longer than 200"),
    ],
)
def test_rules_beyond_the_bounds_are_refused(rule, message):
    with little_work(), pytest.raises(MatrixError, match=message):
        compile_rule(rule, {"numjobs", "rw"})


def test_rule_count_and_total_size_are_bounded():
    names = {"numjobs"}
    with pytest.raises(MatrixError, match="more than 20 rules"):
        compile_rules(["numjobs > 1"] * 21, names)
    big = "numjobs > " + " + ".join(["1"] * 12)  # 39 parts each
    assert len(compile_rules([big] * 6, names)) == 6
    with pytest.raises(MatrixError, match="273 parts together"):
        compile_rules([big] * 7, names)


def test_evaluation_stays_bounded_per_cell():
    rule = compile_rule("numjobs ** numjobs ** numjobs > 1", {"numjobs"})
    with little_work():
        # 9 ** 387420489 is never computed: beyond the bounds the rule does not hold.
        assert not evaluate_rule(rule, {"numjobs": 9})
        assert evaluate_rule(rule, {"numjobs": 2})  # 2 ** 4 = 16
        huge = compile_rule("numjobs * numjobs > 1", {"numjobs"})
        assert not evaluate_rule(huge, {"numjobs": 10**4000})


def test_a_stored_heavy_rule_does_not_pin_the_matrix_page(alice_client, bob_client, alice, bench):
    """A rule stored before this fix (or written to the database directly) is refused by the
    preview with a message; the page answers at once for its owner and for colleagues."""
    matrix = Matrix.objects.create(
        owner=alice,
        name="legacy",
        tool="fio",
        repetitions=1,
        fixed_params={"size": "8m"},
        axes=[{"param": "numjobs", "values": [1, 2]}],
        exclusions=[HEAVY],
    )
    matrix.testbeds.set([bench])
    for client in (alice_client, bob_client):
        with little_work():
            response = client.get(matrix.get_absolute_url())
        assert response.status_code == 200
        assert "beyond" in _page_text(response)


def test_rules_are_evaluated_once_per_distinct_combination(fio_big_matrix, monkeypatch):
    evaluated = []
    evaluate = Rule._evaluate
    monkeypatch.setattr(
        Rule,
        "_evaluate",
        lambda rule, values: evaluated.append(1) or evaluate(rule, values),
    )
    planned = plan(fio_big_matrix)
    assert planned.excluded == 2 * 500
    # 2,000 cells (numjobs 1..1000 x rw write, read); the rule reads numjobs and size only.
    assert len(evaluated) == 1000


@pytest.fixture
def fio_big_matrix(alice, bench):
    matrix = Matrix.objects.create(
        owner=alice,
        name="big",
        tool="fio",
        repetitions=1,
        fixed_params={"size": "8m"},
        axes=[
            {"param": "numjobs", "range": {"start": 1, "stop": 1000, "scale": "linear"}},
            {"param": "rw", "values": ["write", "read"]},
        ],
        exclusions=["numjobs > 500 and size == '8m'"],
    )
    matrix.testbeds.set([bench])
    return matrix


# --- Finding 5: parameters named like dict methods ----------------------------------------

SHADOWING = {"items": 10, "keys": 2, "values": 3, "get": "g", "update": 1, "count": 4}


def test_params_named_items_keys_values_render_everywhere(
    alice_client, bob_client, alice, bench, alice_api
):
    made = alice_api.post(
        "/api/matrices/",
        {
            "name": "md",
            "tool": "mdtest",
            "testbeds": [str(bench.uuid)],
            "repetitions": 1,
            "fixed_params": {"items": 10},
            "axes": [{"param": "branch", "values": [1, 2]}],
        },
        format="json",
    )
    assert made.status_code == 201, made.json()
    matrix = Matrix.objects.get(uuid=made.json()["uuid"])
    expand(matrix)
    # A run stored by a push client or an older version with every shadowing name.
    odd = Run.objects.create(
        owner=alice, testbed=bench, tool="mdtest", status="succeeded", params=SHADOWING
    )
    # And a matrix with them, as an older version or the database may hold.
    legacy = Matrix.objects.create(
        owner=alice,
        name="legacy",
        tool="mdtest",
        repetitions=1,
        fixed_params=SHADOWING,
        axes=[
            {"param": "values", "values": [1, 2]},
            {"param": "items", "range": {"start": 1, "stop": 4}},
        ],
    )
    legacy.testbeds.set([bench])
    run = matrix.runs.first()
    for client in (alice_client, bob_client):
        listing = client.get(reverse("experiments:run_list"))
        assert listing.status_code == 200 and "items=10" in listing.content.decode()
        for target in (run, odd):
            page = client.get(target.get_absolute_url())
            assert page.status_code == 200
            assert "items=10" in page.content.decode()
        for m in (matrix, legacy):
            page = client.get(m.get_absolute_url())
            assert page.status_code == 200, m
            assert "items=10" in page.content.decode()
        text = client.get(legacy.get_absolute_url()).content.decode()
        assert "keys=2" in text and "values: 1, 2" in text and "items: pow2 1..4" in text


def test_pairs_filter_gives_a_mappings_pairs():
    from experiments.templatetags.beeweb import entry, pairs

    assert pairs({"items": 1, "keys": 2}) == [("items", 1), ("keys", 2)]
    assert pairs(None) == [] and pairs("text") == []
    assert entry({"values": [1]}, "values") == [1]
    assert entry({"range": {}}, "values") is None
