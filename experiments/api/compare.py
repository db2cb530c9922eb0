"""GET /api/compare/: the comparison page's aggregated series as JSON.

Takes the same query string as the comparison page (``metric``, ``x``, ``series``, ``tool``,
``testbed``, ``matrix``, ``unit``) and returns, per (series, x), n, mean, min, max and
standard deviation in base units, computed by the database
(``Metric.objects.for_comparison``).
"""

from __future__ import annotations

import math

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from experiments import dimensions
from experiments.models import Metric, Run
from experiments.models.runs import Tool
from experiments.utils import is_uuid
from runners.parsers.base import METRIC_UNITS


class PointSerializer(serializers.Serializer):
    series = serializers.CharField(allow_null=True)
    series_label = serializers.CharField()
    x = serializers.CharField(allow_null=True)
    x_label = serializers.CharField()
    n = serializers.IntegerField()
    mean = serializers.FloatField()
    min = serializers.FloatField()
    max = serializers.FloatField()
    stddev = serializers.FloatField(allow_null=True)


class ComparisonSerializer(serializers.Serializer):
    metric = serializers.CharField()
    unit = serializers.CharField()
    x = serializers.CharField()
    series = serializers.CharField()
    n_runs = serializers.IntegerField()
    points = PointSerializer(many=True)


def _stddev(row: dict) -> float | None:
    if row.get("stddev") is not None:
        return row["stddev"]
    n, sum_sq, mean = row["n"], row.get("sum_sq"), row["mean"]
    if n is None or n < 2 or sum_sq is None:
        return None
    variance = max(0.0, (sum_sq - n * mean * mean) / (n - 1))
    return math.sqrt(variance)


def compare_rows(query, user) -> dict:
    """The comparison of ``query`` (a QueryDict) as a JSON-ready dict; ValueError for a bad
    request."""
    metric = query.get("metric") or "write_bw"
    if metric not in METRIC_UNITS:
        raise ValueError(f"unknown metric {metric!r}")
    x = query.get("x", "param:threads")
    series = query.get("series", "arch")
    for key in (x, series):
        if key:
            dimensions.expression(key)  # ValueError for an unknown dimension
    runs = Run.objects.visible_to(user)
    tools = [t for t in query.getlist("tool") if t in Tool.values]
    testbeds = [t for t in query.getlist("testbed") if is_uuid(t)]
    matrices = [m for m in query.getlist("matrix") if is_uuid(m)]
    if tools:
        runs = runs.filter(tool__in=tools)
    if testbeds:
        runs = runs.filter(testbed__uuid__in=testbeds)
    if matrices:
        runs = runs.filter(matrix__uuid__in=matrices)
    rows = Metric.objects.for_comparison(metric, x or None, series or None, runs)
    points = [{
        "series": None if not series or row["series"] is None else str(row["series"]),
        "series_label": dimensions.display_value(series, row["series"]) if series else "all",
        "x": None if not x or row["x"] is None else str(row["x"]),
        "x_label": dimensions.display_value(x, row["x"]) if x else "",
        "n": row["n"], "mean": row["mean"], "min": row["min"], "max": row["max"],
        "stddev": _stddev(row),
    } for row in rows]
    return {"metric": metric, "unit": METRIC_UNITS[metric], "x": x, "series": series,
            "n_runs": sum(p["n"] for p in points), "points": points}


class CompareView(APIView):
    """The comparison page's series for one metric, grouped by ``x`` and ``series``."""

    @extend_schema(
        parameters=[
            OpenApiParameter("metric", OpenApiTypes.STR, description="Metric name "
                             "(DESIGN.md vocabulary), default write_bw."),
            OpenApiParameter("x", OpenApiTypes.STR, description="Dimension on the x axis "
                             "(arch, raid, tool, testbed, tuning, param:<name>, "
                             "tuning:<scope.key>, …)."),
            OpenApiParameter("series", OpenApiTypes.STR, description="Dimension that "
                             "separates the series."),
            OpenApiParameter("tool", OpenApiTypes.STR, many=True),
            OpenApiParameter("testbed", OpenApiTypes.UUID, many=True),
            OpenApiParameter("matrix", OpenApiTypes.UUID, many=True),
        ],
        responses={200: ComparisonSerializer},
    )
    def get(self, request):
        try:
            data = compare_rows(request.query_params, request.user)
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=400)
        return Response(data)
