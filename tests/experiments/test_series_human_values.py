"""A parameter as a comparison's series or filter shows its values as people read them
(issue 25, finding 3): sizes in units, booleans yes/no, in numeric order; the URL and the
filter values keep the normal form, and a numeric x axis stays numeric."""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from experiments import comparison
from experiments.comparison import dimensions
from experiments.models import Run
from experiments.results.store import replace_metrics
from tests.helpers.comparison import make_testbed

pytestmark = pytest.mark.django_db

# Alphabetically "1 MiB" < "128 KiB" < "16 MiB" < "4 KiB": numeric order is another.
SIZES = [1048576, 4096, 16777216, 131072]
IN_ORDER = ["4 KiB", "128 KiB", "1 MiB", "16 MiB"]


@pytest.fixture
def sized(alice):
    tb = make_testbed(alice, "lab", "x86_64", "0")
    value = 1e9
    for bs in SIZES:
        for threads in (1, 4):
            for direct in (True, False):
                run = Run.objects.create(
                    testbed=tb,
                    tool="fio",
                    status="imported",
                    params={"bs": bs, "threads": threads, "direct": direct},
                )
                replace_metrics(run, [{"name": "write_bw", "value": value, "unit": "B/s"}])
                value += 1e8
    return tb


def compute(query: dict):
    spec = comparison.ComparisonSpec.from_query({"metric": "write_bw", **query})
    return comparison.compute(spec, Run.objects.all())


def test_a_size_series_is_labelled_in_units_in_numeric_order(sized):
    result = compute({"series": "param:bs", "x": "param:threads", "ignore": "param:direct"})
    # The series' keys stay the normal form (baseline and filters in the URL).
    assert result.series == [
        [str(s), label] for s, label in zip(sorted(SIZES), IN_ORDER, strict=True)
    ]
    assert [label for _, label in result.series_names] == IN_ORDER
    # The table: its rows in numeric order of the series.
    assert list(dict.fromkeys(p.series for p in result.points)) == IN_ORDER
    # The chart's legend, in the same order; the x axis (threads) stays numeric.
    figure = result.charts[0].figure
    assert [t["name"] for t in figure["data"]] == IN_ORDER
    assert figure["layout"]["xaxis"]["type"] == "linear"
    assert figure["data"][0]["x"] == ["1", "4"]
    assert set(result.colours) == set(IN_ORDER)


def test_a_size_x_axis_stays_numeric_with_a_boolean_series(sized):
    result = compute({"series": "param:direct", "x": "param:bs", "ignore": "param:threads"})
    figure = result.charts[0].figure
    assert [t["name"] for t in figure["data"]] == ["no", "yes"]
    axis = figure["layout"]["xaxis"]
    assert axis["type"] == "log" and axis["ticktext"] == IN_ORDER
    assert figure["data"][0]["x"] == [str(s) for s in sorted(SIZES)]
    # The points' x stays the raw number (the table formats it by result.x_dim).
    assert sorted({p.x for p in result.points}, key=float) == [str(s) for s in sorted(SIZES)]


def test_a_baseline_sentence_names_the_size(sized):
    result = compute(
        {"series": "param:bs", "x": "param:threads", "ignore": "param:direct", "baseline": "4096"}
    )
    assert result.baseline_label == "4 KiB"
    assert result.comparisons and all("bs 4 KiB" in c.sentence for c in result.comparisons)


def test_display_value_formats_a_parameter_by_its_kind():
    assert dimensions.display_value("param:bs", "1048576") == "1 MiB"
    assert dimensions.display_value("param:direct", "true") == "yes"
    assert dimensions.display_value("param:runtime", "300") == "5 min"
    assert dimensions.display_value("param:threads", "16") == "16"
    assert dimensions.display_value("param:bs", None) == dimensions.UNKNOWN
    assert dimensions.display_value("raid", "10") == "RAID10"


def options(page: str) -> list[tuple[str, str]]:
    select = page[page.index('<select name="fv"') :]
    select = select[: select.index("</select>")]
    return [
        (html.unescape(v), html.unescape(label))
        for v, label in re.findall(r'<option value="([^"]*)">([^<]*)</option>', select)
    ]


def test_the_filter_dropdown_labels_values_in_units_and_keeps_bytes(alice_client, sized):
    url = reverse("experiments:compare")
    page = alice_client.get(url, {"metric": "write_bw", "fk": "param:bs"}).content.decode()
    assert options(page) == [
        (str(s), label) for s, label in zip(sorted(SIZES), IN_ORDER, strict=True)
    ]
    page = alice_client.get(url, {"metric": "write_bw", "fk": "param:direct"}).content.decode()
    labels = dict((label, v) for v, label in options(page))
    assert sorted(labels) == ["no", "yes"]
    # An option's value, as the URL carries it, filters to its runs; the chip shows units.
    page = alice_client.get(
        url, {"metric": "write_bw", "x": "param:threads", "f": f"param:bs:{1048576}"}
    ).content.decode()
    assert "bs = 1 MiB" in html.unescape(page)
    spec = comparison.ComparisonSpec.from_query(
        {"metric": "write_bw", "f": f"param:direct:{labels['yes']}"}
    )
    result = comparison.compute(spec, Run.objects.all())
    assert result.n_runs == len(SIZES) * 2
