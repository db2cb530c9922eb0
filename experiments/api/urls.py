"""URLs of the API under /api/. Every API view is exempt from LoginRequiredMiddleware (which
would redirect to the login page): DRF's token or session authentication and the permission
classes decide, answering 401/403 in JSON. The interactive docs stay pages for signed-in
people."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required, login_required
from django.urls import URLPattern, URLResolver, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.permissions import IsAuthenticated
from rest_framework.routers import DefaultRouter, SimpleRouter

from experiments.api import alerts, views
from experiments.api.changes import ChangePointViewSet
from experiments.api.compare import CompareView
from experiments.api.token import token_page

app_name = "api"

router = DefaultRouter()
router.register("hardware", views.HardwareProfileViewSet, basename="hardware")
router.register("nodes", views.NodeViewSet, basename="node")
router.register("testbeds", views.TestbedViewSet, basename="testbed")
router.register("tuning-sets", views.TuningSetViewSet, basename="tuningset")
router.register("matrices", views.MatrixViewSet, basename="matrix")
router.register("runs", views.RunViewSet, basename="run")
router.register("metrics", views.MetricViewSet, basename="metric")
router.register("workers", views.WorkerViewSet, basename="worker")
router.register("reports", views.ReportViewSet, basename="report")
router.register("subscriptions", alerts.SubscriptionViewSet, basename="subscription")
router.register("alerts", alerts.AlertViewSet, basename="alert")
router.register("changes", ChangePointViewSet, basename="change")

parts = SimpleRouter()
for parent, items in views.PART_VIEWSETS.items():
    for part, viewset in items:
        parts.register(
            f"{parent}/(?P<parent_uuid>[0-9a-fA-F-]{{36}})/{part}",
            viewset,
            basename=f"{parent}-{part}",
        )
parts.register(
    "reports/(?P<parent_uuid>[0-9a-fA-F-]{36})/share-links",
    views.ShareLinkViewSet,
    basename="report-sharelink",
)


def _token_or_session(patterns):
    """Mark every view of ``patterns`` login_not_required (recursively). DRF's own views
    already are; this keeps the rule explicit for every API URL, whatever its view."""
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            _token_or_session(pattern.url_patterns)
        elif isinstance(pattern, URLPattern):
            login_not_required(pattern.callback)
    return patterns


api_patterns = _token_or_session(
    [
        path("compare/", CompareView.as_view(), name="compare"),
        path(
            "matrices/<uuid:uuid>/schedule/",
            alerts.MatrixScheduleView.as_view(),
            name="matrix-schedule",
        ),
        path(
            "schema/",
            SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]),
            name="schema",
        ),
        *parts.urls,
        *router.urls,
    ]
)

urlpatterns = [
    *api_patterns,
    # DRF marks its views login_not_required; the docs are pages for people: sign in first.
    # The split view serves Swagger UI's start-up script as a file (docs/?script): the
    # Content-Security-Policy allows no inline script. (No Redoc: its bundle loads a logo
    # from Redocly's CDN.)
    path(
        "docs/",
        login_required(SpectacularSwaggerSplitView.as_view(url_name="api:schema")),
        name="docs",
    ),
    path("token/", token_page, name="token"),
]
