"""GET /api/compare/: the comparison page's result as JSON.

Takes exactly the comparison page's query string (``metric`` (repeatable), ``x``, ``y``,
``series``, ``baseline``, ``f`` filters, ``tool``, ``testbed``, ``matrix``, ``from``/``to``,
``norm``, ``chart``, ``err``, ``reps``, ``unit``), parses it with
``ComparisonSpec.from_query`` and returns ``experiments.comparison.compute(...).to_json()``:
the same aggregated series (n, mean, median, min, max, stddev, confidence intervals, baseline
differences) and chart figures the page draws, computed by the database.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from experiments import comparison
from experiments.models import Run


def _param(name: str, kind=OpenApiTypes.STR, many: bool = False, text: str = ""):
    return OpenApiParameter(name, kind, many=many, description=text)


class CompareView(APIView):
    """The comparison of the page with the same query string, as JSON."""

    @extend_schema(
        parameters=[
            _param(
                "metric", many=True, text="Metric names (DESIGN.md vocabulary); default write_bw."
            ),
            _param(
                "x",
                text="Dimension on the x axis: arch, cpu, hardware, raid, fs, "
                "testbed, beegfs, fabric, tuning, tool, source, param:<name>, "
                "tuning:<scope.key>.",
            ),
            _param("y", text="Second axis (heatmaps)."),
            _param("series", text="Dimension that separates the series."),
            _param("baseline", text="Series value the others are compared to."),
            _param("f", many=True, text="Filters <dimension>:<value>."),
            _param("tool", many=True),
            _param("testbed", OpenApiTypes.UUID, many=True),
            _param("matrix", OpenApiTypes.UUID, many=True),
            _param("from", OpenApiTypes.DATE),
            _param("to", OpenApiTypes.DATE),
            _param("norm"),
            _param("chart"),
            _param("err"),
            _param("reps"),
            _param("unit"),
        ],
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        query = request.query_params
        spec = comparison.ComparisonSpec.from_query(query)
        if spec.errors:
            return Response({"errors": spec.errors}, status=400)
        if not spec.metrics and not query.getlist("metric"):
            spec.metrics = ["write_bw"]
        result = comparison.compute(spec, Run.objects.visible_to(request.user))
        return Response(result.to_json())
