# ruff: noqa: E501 - the old template loop is kept verbatim, one template line a line
"""The comparison page's Python-rendered parts (experiments.templatetags.beeweb's
comparison_rows, difference_rows and uuid_options) give exactly the HTML of the template loops
they replaced: those loops are kept here verbatim and both are rendered over points, rows and
options that take every branch (peak and mean, baseline, verdicts, steady state, approximate
values, adaptive cells, efficiency with and without a scope, n < 3, missing statistics, flags,
several testbeds, size parameters on the axes, characters HTML must escape)."""

from __future__ import annotations

import re
import uuid

import pytest
from django.template import engines
from django.urls import reverse

from experiments.comparison.result import ComparisonResult, Difference, MetricInfo, Point
from experiments.models import Matrix

# The table's row loop as templates/experiments/_comparison_result.html had it.
OLD_ROWS = (
    "{% load beeweb %}"
    "{% for p in pts %}<tr>\n"
    '<td><span class="swatch" style="background:{{ result.colours|lookup:p.series }}"></span>{{ p.series }}</td>{% if result.x_label %}<td>{{ p.x|dimension_value:result.x_dim }}</td>{% endif %}{% if result.y_label %}<td>{{ p.y|dimension_value:result.y_dim }}</td>{% endif %}\n'
    '{% if result.statistic == "peak" %}<td>{% if p.peak_of > 1 %}{{ p.peak_at|default:"—" }} <span class="muted">(best of {{ p.peak_of }})</span>{% else %}{{ p.peak_at|default:"" }} <span class="muted">(one point: no sweep)</span>{% endif %}</td>{% endif %}<td class="num"{% if p.why_n %} title="{{ p.why_n }}"{% endif %}>{{ p.n }}</td><td class="num"{% if p.approximate %} title="approximate: the study gives the value as &quot;about&quot;"{% endif %}>{% if p.approximate %}≈{% endif %}{{ p.mean|num:4 }}</td><td class="num">{{ p.median|num:4 }}</td><td class="num">{{ p.min|num:4 }}</td><td class="num">{{ p.max|num:4 }}</td><td class="num">{{ p.stddev|num:3 }}</td>\n'
    '<td class="num{% if p.noisy %} noisy{% endif %}">{% if p.cv is not None %}{{ p.cv_pct|floatformat:1 }}%{% else %}—{% endif %}</td>\n'
    '<td class="num ci">{% if p.n < 3 %}<span class="muted" title="A 95% confidence interval of fewer than three values says little; min–max {{ p.min|num:4 }} – {{ p.max|num:4 }}">n &lt; 3</span>{% elif p.ci_low is not None %}{{ p.ci_low|num:4 }} – {{ p.ci_high|num:4 }}{% else %}—{% endif %}</td>\n'
    '<td class="num"{% if p.limit_name %} title="{{ p.limit_name }} ({{ p.limit_scope }}): {{ p.limit_value|num:4 }} {{ m.unit }} ({{ p.limit_detail }})"{% endif %}>{% if p.efficiency is not None %}{{ p.efficiency|floatformat:0 }}% <span class="muted">of {{ p.limit_name }}{% if p.limit_scope and p.limit_scope != "testbed" %} ({{ p.limit_scope }}){% endif %}</span>{% else %}—{% endif %}</td>\n'
    '{% if result.has_verdicts %}<td class="bottleneck">{{ p.bottleneck_text|default:"—" }}</td>{% endif %}{% if result.has_steady %}<td class="num steady">{% if p.steady is not None %}{{ p.steady|num:4 }} / {{ p.whole|num:4 }}{% if p.steady_n < p.n %} <span class="muted">({{ p.steady_n }} of {{ p.n }} runs)</span>{% endif %}{% else %}—{% endif %}</td>{% endif %}\n'
    '{% if result.baseline_label %}<td class="num">{{ p.diff_pct|signed_pct }}</td><td class="num">{{ p.p_value|pvalue }}</td>{% endif %}\n'
    '<td>{% if p.testbed == "(several)" %}<span class="muted">several testbeds</span>{% endif %}{% for f in p.flags %}<span class="flag{% if \'cache\' in f %} cache{% endif %}{% if f|slice:":9" == "collapsed" %} collapsed{% endif %}">{{ f }}</span>{% endfor %}{% if p.why_n %}<span class="muted why-n">{{ p.why_n }}</span>{% endif %}</td>\n'
    "</tr>{% endfor %}"
)
NEW_ROWS = "{% load beeweb %}{% comparison_rows result m pts %}"
# The configuration differences as the template had them.
OLD_DIFFERENCES = (
    "{% load beeweb %}"
    "{% for d in ds %}\n"
    '<details class="diff"{% if d.rows|length <= 12 %} open{% endif %}><summary>{{ d.series }} vs {{ d.baseline }}: {% if d.rows %}{{ d.rows|length }} difference{{ d.rows|length|pluralize }} ({{ d.areas }}){% else %}same hardware, testbed and tuning{% endif %}</summary>\n'
    '{% if d.rows %}<div class="table-scroll"><table class="diff-table"><thead><tr><th>Area</th><th>Attribute</th><th>{{ d.series }}</th><th>{{ d.baseline }}</th></tr></thead><tbody>\n'
    '{% for row in d.rows %}<tr class="changed"><td>{{ row.0 }}</td><td>{{ row.1 }}</td><td>{{ row.2 }}</td><td>{{ row.3 }}</td></tr>{% endfor %}</tbody></table></div>{% endif %}\n'
    "</details>{% endfor %}"
)
NEW_DIFFERENCES = "{% load beeweb %}{% differences ds %}"

OLD_OPTIONS = (
    '{% for m in matrices %}<option value="{{ m.uuid }}"{% if m.uuid|stringformat:"s" in '
    "spec.matrices %} selected{% endif %}>{{ m.name }}</option>{% endfor %}"
)
NEW_OPTIONS = "{% load beeweb %}{% uuid_options pairs spec.matrices %}"


def render(source: str, context: dict) -> str:
    return engines["django"].from_string(source).render(context)


def point(**kw) -> Point:
    base = dict(
        metric="write_bw", series="x86_64", series_key="x86_64", x="8", x_key="8", y="",
        y_key="", n=5, mean=1234.5678, median=1200.0, min=1000.0, max=1500.25,
        stddev=12.345, cv=0.0123, ci_low=1100.0, ci_high=1300.0, noisy=False, unit="GB/s",
    )  # fmt: skip
    base.update(kw)
    return Point(**base)


POINTS = [
    point(),
    point(
        series='aarch64 <Arm> & "co"',
        x="10737418240",
        n=2,
        cv=None,
        ci_low=None,
        ci_high=None,
        stddev=None,
        median=None,
        noisy=True,
        approximate=True,
        why_n="stopped at M=2 <runs>",
        flags=["cache-resident", "collapsed in 1 run", "a&b"],
        testbed="(several)",
    ),  # fmt: skip
    point(
        n=4,
        ci_low=None,
        efficiency=87.6,
        limit_name="network",
        limit_scope="testbed",
        limit_value=12.5,
        limit_detail="2 × 100 Gb/s",
        diff_pct=-12.34,
        p_value=0.0004,
        bottleneck={"disk": 3, "cpu": 1},
        steady=1.5,
        whole=1.4,
        steady_n=2,
    ),  # fmt: skip
    point(
        mean=0.0,
        min=-3.5,
        max=0.000123456,
        efficiency=100.0,
        limit_name="drives <RAID>",
        limit_scope="one target",
        limit_value=None,
        limit_detail='a "b"',
        diff_pct=5.55,
        p_value=0.5,
        bottleneck={"disk": 5},
        steady=2.0,
        whole=2.0,
        steady_n=5,
        peak_at="threads 16",
        peak_of=4,
        cv=0.25,
    ),  # fmt: skip
    point(
        n=1,
        peak_of=1,
        peak_at="",
        mean=12345678.9,
        min=1e-9,
        max=1e9,
        diff_pct=None,
        p_value=None,
        bottleneck={"net": 1, "cpu": 1},
        steady=None,
    ),  # fmt: skip
    point(n=3, peak_of=1, peak_at="nodes 2", flags=[]),
]


@pytest.mark.parametrize("statistic", ["mean", "peak"])
@pytest.mark.parametrize("baseline", ["", "x86 <base>"])
@pytest.mark.parametrize(
    "axes",
    [
        ("", "", "", ""),
        ("Threads", "param:threads", "Size", "param:file_size"),
        ("Block size", "param:bs", "", ""),
    ],
)
@pytest.mark.parametrize("extras", [0, 1, 2])
def test_comparison_rows_match_the_template_loop(statistic, baseline, axes, extras):
    points = [p for p in POINTS]
    if extras == 0:  # no verdicts, no steady state: those columns are left out
        for p in points:
            p.bottleneck, p.steady = {}, None
    if extras == 1:
        points = points[:2]
    result = ComparisonResult(
        query="", points=points, statistic=statistic, baseline_label=baseline,
        x_label=axes[0], x_dim=axes[1], y_label=axes[2], y_dim=axes[3],
        colours={"x86_64": "#1f77b4", "aarch64 <Arm> & \"co\"": "#ff7f0e"},
    )  # fmt: skip
    for p in points:
        p.y = "1073741824"
    metric = MetricInfo("write_bw", "B/s", "GB/s <dec>", 1e9, True, "Write")
    context = {"result": result, "m": metric, "pts": points}
    old = render(OLD_ROWS, context)
    assert old.count("<tr>") == len(points)
    assert render(NEW_ROWS, context) == old


def test_comparison_rows_of_no_points():
    metric = MetricInfo("write_bw", "B/s", "GB/s", 1e9, True)
    context = {"result": ComparisonResult(query=""), "m": metric, "pts": []}
    assert render(NEW_ROWS, context) == ""


def test_differences_match_the_template_loop():
    rows = [
        ["hardware", "CPU", 'EPYC "7763"', "Xeon <x>"],
        ["tuning", "numjobs", 4, None],
        ["run", "rw", "", "read"],
    ]
    items = [
        Difference("a <b>", "c & d", rows),
        Difference("one", "base", rows[:1]),
        Difference("same", "base", []),
        Difference("many", "base", [["tuning", f"key{i}", str(i), "x"] for i in range(13)]),
        Difference("twelve", "base", [["testbed", f"key{i}", str(i), "x"] for i in range(12)]),
    ]
    old = render(OLD_DIFFERENCES, {"ds": items})
    assert old.count("<details") == 5 and old.count(" open>") == 4
    # The one deliberate change: the class of every row on the table body instead.
    changed = old.replace('<tr class="changed">', "<tr>").replace(
        "<tbody>", '<tbody class="changed">'
    )
    assert changed != old
    assert render(NEW_DIFFERENCES, {"ds": items}) == changed
    assert render(NEW_DIFFERENCES, {"ds": []}) == ""


def test_json_data_is_json_script_without_spaces():
    import json

    from django.template.defaultfilters import json_script

    value = {"a": [1, 2.5, None, "</script><!-- & 'x' \u00b7"], "b": {"c": True}}
    ours = render('{% load beeweb %}{{ v|json_data:"x" }}', {"v": value})
    theirs = str(json_script(value, "x"))

    def body(html: str) -> str:
        return html.split(">", 1)[1].rsplit("<", 1)[0]

    assert (
        ours.split(">", 1)[0] == theirs.split(">", 1)[0] == '<script id="x" type="application/json"'
    )
    assert json.loads(body(ours)) == json.loads(body(theirs)) == value
    assert "<" not in body(ours) and ">" not in body(ours) and "&" not in body(ours)
    assert body(ours) == body(theirs).replace(", ", ",").replace(": ", ":")
    assert len(ours) < len(theirs)


@pytest.mark.django_db
def test_uuid_options_match_the_template_loop(alice):
    from experiments.models import Matrix

    for name in ("b <one>", "a & two", 'c "three"'):
        Matrix.objects.create(owner=alice, name=name, tool="fio")
    chosen = Matrix.objects.order_by("name")
    for selected in ([], [str(chosen[0].uuid)], [str(m.uuid) for m in chosen], [str(uuid.uuid4())]):
        spec = {"matrices": selected}
        old = render(OLD_OPTIONS, {"matrices": Matrix.objects.only("uuid", "name"), "spec": spec})
        new = render(
            NEW_OPTIONS, {"pairs": Matrix.objects.values_list("uuid", "name"), "spec": spec}
        )
        assert old.count("<option") == 3 and old.count(" selected") == len(
            set(selected) & {str(m.uuid) for m in chosen}
        )
        assert new == old


def test_choice_options_match_the_template_loop():
    old = (
        '{% for key, label in dims %}<option value="{{ key }}"{% if key == spec.x %} selected'
        "{% endif %}>{{ label }}</option>{% endfor %}"
    )
    new = "{% load beeweb %}{% choice_options dims spec.x %}"
    dims = [("arch", "Architecture"), ("param:bs", 'Block <size> & "co"'), ("tool", "Tool")]
    for x in ("", "param:bs", "tool", None, "other"):
        context = {"dims": dims, "spec": {"x": x}}
        assert render(new, context) == render(old, context)
    assert render(new, {"dims": [], "spec": {}}) == ""


def test_the_differences_tables_rows_are_highlighted():
    """The rows' highlight now comes from their table body's class."""
    from pathlib import Path

    css = (Path(__file__).resolve().parents[2] / "static" / "beeweb.css").read_text()
    assert ".changed td {" in css and "tr.changed td" not in css


@pytest.mark.django_db
def test_the_matrix_select_lists_the_chosen_and_newest_and_a_search_finds_the_rest(
    alice, alice_client
):
    """A lab's history of matrices does not weigh on every comparison page: the select lists
    the chosen matrices and the newest MATRIX_CHOICES, and the search box's endpoint finds
    any other by name (the chosen ones kept selected)."""
    from experiments.views import compare

    compare.MATRIX_CHOICES = 3
    try:
        matrices = [
            Matrix.objects.create(owner=alice, name=f"sweep {i:02d}", tool="dd") for i in range(8)
        ]
        oldest = matrices[0]
        page = alice_client.get(f"{reverse('experiments:compare')}?matrix={oldest.uuid}")
        select = re.search(r'<select name="matrix".*?</select>', page.content.decode(), re.S)
        names = re.findall(r"<option[^>]*>([^<]*)</option>", select.group(0))
        assert names == ["sweep 00", "sweep 07", "sweep 06", "sweep 05"]
        assert f'<option value="{oldest.uuid}" selected>' in select.group(0)
        text = page.content.decode()
        assert 'id="matrix-find"' in text and "the newest 4 of 8 listed" in text

        url = reverse("experiments:compare_matrix_options")
        found = alice_client.get(url, {"q": "sweep 0", "matrix": [str(oldest.uuid), "x"]})
        assert re.findall(r">([^<]*)</option>", found.content.decode()) == [
            "sweep 00", "sweep 07", "sweep 06", "sweep 05"
        ]  # fmt: skip
        one = alice_client.get(url, {"q": "EEP 02"}).content.decode()
        assert re.findall(r">([^<]*)</option>", one) == ["sweep 02"]
        none = alice_client.get(url, {"q": "<b>nothing</b>"}).content.decode()
        assert "no other matrix holds “&lt;b&gt;nothing&lt;/b&gt;”" in none
        from django.test import Client

        assert Client().get(url, {"q": "sweep"}).status_code == 302  # login first
    finally:
        compare.MATRIX_CHOICES = 100

    # Few matrices: all listed, no search box.
    page = alice_client.get(reverse("experiments:compare")).content.decode()
    assert 'id="matrix-find"' not in page and page.count("sweep 0") == 8
