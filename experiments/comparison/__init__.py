"""Comparisons: one computation behind the compare page, reports, share links, CSV/JSON export
and the REST API.

Public interface
----------------
``ComparisonSpec``
    What to compare, parsed and validated from a query string (the URL holds the whole state):

    ==============  ==========================================================================
    ``metric``      metric name(s) of DESIGN.md's vocabulary, repeatable (``write_bw``)
    ``x``           dimension on the x axis (``param:threads``, ``tool``…); empty: no x axis.
                    Absent means ``param:threads``.
    ``y``           second dimension for a heatmap (``param:stripe_count``)
    ``series``      dimension that separates the series (``arch``, ``raid``…); absent: ``arch``
    ``baseline``    raw value of the series the others are compared against (``10``)
    ``f``           filter ``<dimension>:<value>``, repeatable: the same dimension ORed (IN),
                    different dimensions ANDed: ``f=arch:aarch64&f=arch:x86_64&f=raid:0``
    ``tool``, ``testbed`` (uuid), ``matrix`` (uuid): repeatable shortcuts, as before
    ``from``/``to`` run creation date range (YYYY-MM-DD, inclusive)
    ``norm``        ``server`` | ``target`` | ``client`` | ``core`` (per storage server…)
    ``stat``        ``mean`` (default: means at the same x) | ``peak`` (each series' best
                    point over its sweep, compared peak with peak)
    ``ignore``      attribute compared runs may differ in, repeatable: ``tool``, ``testbed``,
                    ``target``, ``tuning``, ``source``, ``hardware``, ``memory``,
                    ``param:<name>`` (sentences name what they ignore)
    ``chart``       ``line`` | ``bar`` | ``heatmap``;  ``err``: ``ci`` | ``minmax`` | ``sd`` |
                    ``none``;  ``reps=1`` all repetitions as points;  ``unit=GiB``
    ==============  ==========================================================================

    Dimensions are those of ``experiments.comparison.dimensions`` (arch, cpu, hardware, raid, fs,
    testbed,
    beegfs, fabric, tuning, matrix, tool, source, ``param:<name>``, ``tuning:<scope.key>``,
    ``hw:<field>``). ``ComparisonSpec.from_query(request.GET)`` never raises: problems are
    collected in ``spec.errors``. ``spec.to_query()`` gives the canonical query string back.

``compute(spec, runs=None) -> ComparisonResult``
    ``runs`` is a Run queryset the comparison is limited to (``Run.objects.visible_to(user)``).
    Aggregation runs in the database (``MetricQuerySet.summary`` and friends); the number of
    queries does not depend on the number of runs (it grows with the number of testbeds only
    through a fixed set of bulk queries).

``ComparisonResult``
    ``points`` (``Point``: metric, series, x, y, n, mean, median, min, max, stddev, cv,
    ci_low, ci_high, noisy, efficiency, limit_name, limit_value, flags…; values in display
    units, ``unit`` names them), ``comparisons`` (``BaselineComparison``: diff %, Welch's p,
    a plain-language sentence), ``differences`` (configuration that differs between a series
    and the baseline), ``charts`` (plotly figure dicts), ``colours`` (series -> colour, the
    same in every chart of a result). ``to_json()`` / ``ComparisonResult.from_json()`` round
    trip (the frozen snapshot of a share link; the API's response body). ``csv_rows()`` gives
    the table for CSV export.

Modules: ``spec`` (what to compare), ``computation`` (``compute``), ``comparability`` (what
makes runs alike and what differs), ``limits`` (theoretical limits and efficiency),
``statements`` (baseline comparisons in words), ``charts`` (plotly figures), ``presets`` (the
published comparisons), ``context`` (testbed facts loaded in bulk), ``result`` (dataclasses).
"""

from experiments.comparison.charts import MINMAX_NOTE, filter_summary
from experiments.comparison.comparability import working_set
from experiments.comparison.computation import compute, filtered_metrics
from experiments.comparison.result import (
    BaselineComparison,
    Chart,
    ComparisonResult,
    Difference,
    MetricInfo,
    Point,
)
from experiments.comparison.spec import (
    BOTTLENECKS,
    CHARTS,
    ERRORS,
    NORMALISATIONS,
    STATS,
    ComparisonSpec,
    dimension_choices,
    distinct_values,
    metric_unit,
)
from experiments.comparison.statements import named

__all__ = [
    "BOTTLENECKS",
    "CHARTS",
    "ERRORS",
    "MINMAX_NOTE",
    "NORMALISATIONS",
    "STATS",
    "BaselineComparison",
    "Chart",
    "ComparisonResult",
    "ComparisonSpec",
    "Difference",
    "MetricInfo",
    "Point",
    "compute",
    "dimension_choices",
    "distinct_values",
    "filter_summary",
    "filtered_metrics",
    "metric_unit",
    "named",
    "working_set",
]
