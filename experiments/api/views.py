"""API views: one viewset per object, parts nested under their parent, bulk ingest of runs.

Lists are built with ``select_related``/``prefetch_related`` so their query count does not
grow with the page size (tests/api/test_queries.py).
"""

from __future__ import annotations

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, PermissionDenied, ValidationError
from rest_framework.response import Response

from experiments.api import filters, serializers
from experiments.api.pagination import RunCursorPagination
from experiments.api.parsers import (
    BulkJSONParser,
    JSONLinesParser,
    StrictJSONParser,
    UncheckedJSON,
)
from experiments.api.permissions import StaffWrites
from experiments.comparison import reports as report_ops
from experiments.execution import dispatch as dispatching
from experiments.execution import noderequests
from experiments.inventory.live import LiveError, differences, plan_live, read_answer
from experiments.inventory.topology import apply_topology
from experiments.matrices import livecheck
from experiments.matrices.axes import MatrixError
from experiments.matrices.expansion import MatrixBusy, delete_matrix, launch
from experiments.matrices.launching import launch_refused, node_problem
from experiments.matrices.livecheck import live_node_choices
from experiments.models import (
    Drive,
    HardwareProfile,
    Matrix,
    Metric,
    Nic,
    Node,
    NodeRequest,
    Report,
    Run,
    ShareLink,
    StoragePool,
    Target,
    Testbed,
    TestbedNode,
    TuningSet,
    Worker,
)
from experiments.results.ingest import MAX_REQUEST_BYTES, IngestError, gc_paused, ingest
from experiments.shared.utils import is_uuid


class IntegrityAsValidation:
    """A uniqueness race that slipped past validation is the client's 400, not a 500."""

    def perform_create(self, serializer):
        try:
            with transaction.atomic():
                self.save_new(serializer)
        except IntegrityError as exc:
            raise ValidationError({"detail": f"conflicts with an existing object: {exc}"}) from None

    def save_new(self, serializer):
        serializer.save(owner=self.request.user)

    def perform_update(self, serializer):
        try:
            with transaction.atomic():
                serializer.save()
        except IntegrityError as exc:
            raise ValidationError({"detail": f"conflicts with an existing object: {exc}"}) from None

    def perform_destroy(self, instance):
        from django.db.models import ProtectedError, RestrictedError

        try:
            with transaction.atomic():
                instance.delete()
        except (ProtectedError, RestrictedError) as exc:
            raise ValidationError({"detail": f"still in use: {exc.args[0]}"}) from None


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The object is in use."
    default_code = "conflict"


class NodeUnavailable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The node could not be asked."
    default_code = "node_unavailable"


class LiveTopologyDiffers(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The live topology differs from the stored one."
    default_code = "live_topology_differs"


class BrokerDown(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The message broker is unreachable."
    default_code = "broker_unavailable"


class OwnedViewSet(IntegrityAsValidation, viewsets.ModelViewSet):
    lookup_field = "uuid"
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    ordering_fields = ["name", "created", "updated"]


@extend_schema_view(list=extend_schema(summary="Hardware profiles with drives and NICs"))
class HardwareProfileViewSet(OwnedViewSet):
    queryset = (
        HardwareProfile.objects.select_related("owner")
        .prefetch_related("drives", "nics")
        .order_by("name", "id")
    )
    serializer_class = serializers.HardwareProfileSerializer
    filterset_class = filters.HardwareProfileFilter


class NodeViewSet(OwnedViewSet):
    queryset = Node.objects.select_related("owner", "profile").order_by("hostname", "id")
    serializer_class = serializers.NodeSerializer
    filterset_class = filters.NodeFilter
    ordering_fields = ["hostname", "created", "updated"]


class TestbedViewSet(OwnedViewSet):
    queryset = (
        Testbed.objects.select_related("owner", "live_node")
        .order_by("name", "id")
        .prefetch_related(
            "operators",
            "operator_groups",
            Prefetch("members", TestbedNode.objects.select_related("node")),
            Prefetch("targets", Target.objects.select_related("node", "drive", "pool")),
            "pools",
            "mirror_groups__primary",
            "mirror_groups__secondary",
        )
    )
    serializer_class = serializers.TestbedSerializer
    filterset_class = filters.TestbedFilter

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={
            200: OpenApiTypes.OBJECT,
            400: OpenApiTypes.OBJECT,
            403: OpenApiTypes.OBJECT,
            503: OpenApiTypes.OBJECT,
        },
        summary="Read the testbed's live BeeGFS topology through a node's worker; preview or save",
        description='Body: {"node": node UUID (default: the testbed\'s live node, else the '
        'likely management node), "save": false (preview) or true, "profile": hardware '
        "profile UUID for new nodes}. The node's agent runs fixed read-only beegfs-ctl "
        "listings; 503 when it cannot be asked or its beegfs-ctl failed.",
    )
    @action(detail=True, methods=["post"], url_path="live-topology")
    def live_topology(self, request, uuid=None):
        testbed = self.get_object()
        if not testbed.can_edit(request.user):
            raise PermissionDenied("Only the owner or staff may import into this testbed.")
        data = request.data if isinstance(request.data, dict) else {}
        save = data.get("save", False)
        if save not in (True, False):
            raise ValidationError({"save": "true or false"})
        node = _live_node(testbed, data.get("node"))
        profile = None
        if data.get("profile") not in (None, ""):
            value = data["profile"]
            if not isinstance(value, str) or not is_uuid(value):
                raise ValidationError({"profile": "a hardware profile UUID"})
            profile = HardwareProfile.objects.filter(uuid=value).first()
            if profile is None:
                raise ValidationError({"profile": "no such hardware profile"})
        try:
            answer = noderequests.ask(
                node.hostname,
                NodeRequest.Kind.BEEGFS_TOPOLOGY,
                user=request.user,
                timeout=settings.LIVE_TOPOLOGY_SECONDS,
            )
            live = read_answer(answer.result)
        except (noderequests.NodeRequestError, LiveError) as exc:
            message = f"{node.hostname} could not tell the live topology: {exc}"
            raise NodeUnavailable(message) from None
        plan = plan_live(testbed, live)
        if plan.errors or plan.is_empty:
            problems = "; ".join(f"{e.label}: {e}" for e in plan.errors) or "nothing listed"
            raise NodeUnavailable(f"the listings of {node.hostname} could not be read: {problems}")
        drift = differences(testbed, live)
        summary = apply_topology(testbed, plan, request.user, profile=profile, dry_run=not save)
        if save:
            Testbed.objects.filter(pk=testbed.pk).update(
                live_node=node, live_imported_at=timezone.now()
            )
        return Response(
            {
                "node": node.hostname,
                "asked_at": answer.created_at,
                "round_trip_s": answer.round_trip,
                "saved": save,
                "targets": [
                    {
                        "kind": t.kind,
                        "target_id": t.target_id,
                        "node": t.node,
                        "reachability": t.reachability,
                        "consistency": t.consistency,
                        "capacity_gb": t.capacity_gb,
                        "error": t.error,
                    }
                    for t in live.targets.values()
                ],
                "differences": drift,
                "changes": [
                    {"model": c.model, "label": c.label, "action": c.action, "details": c.details}
                    for c in summary.changes
                ],
                "warnings": summary.warnings,
            }
        )


def _live_node(testbed: Testbed, value) -> Node:
    """The node an API call names for a live read: 400 for a malformed or unknown UUID, 403
    for a node this testbed's runs may not use; without one, the testbed's live node or the
    likely management node."""
    if value in (None, ""):
        choices = live_node_choices(testbed)
        if not choices:
            raise ValidationError({"node": "no node of this testbed's owner can be asked"})
        return choices[0]
    if not isinstance(value, str) or not is_uuid(value):
        raise ValidationError({"node": "a node UUID"})
    node = Node.objects.filter(uuid=value).select_related("owner").first()
    if node is None:
        raise ValidationError({"node": "no such node"})
    problem = node_problem(testbed, node)
    if problem:
        raise PermissionDenied(f"This node cannot be asked for this testbed: {problem}.")
    return node


class TuningSetViewSet(OwnedViewSet):
    queryset = (
        TuningSet.objects.select_related("owner", "parent")
        .prefetch_related("params")
        .order_by("name", "id")
    )
    serializer_class = serializers.TuningSetSerializer
    filterset_class = filters.TuningSetFilter

    def perform_destroy(self, instance):
        if instance.children.exists():
            raise ValidationError({"detail": "Other tuning sets inherit from this one."})
        super().perform_destroy(instance)


@extend_schema_view(
    destroy=extend_schema(
        responses={204: None, 409: OpenApiTypes.OBJECT},
        summary="Delete the matrix and its runs (409 while any run is queued or running)",
    )
)
class MatrixViewSet(OwnedViewSet):
    queryset = (
        Matrix.objects.select_related("owner")
        .prefetch_related("testbeds", "tuning_sets")
        .order_by("-created", "-id")
    )
    serializer_class = serializers.MatrixSerializer
    filterset_class = filters.MatrixFilter

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={
            200: OpenApiTypes.OBJECT,
            400: OpenApiTypes.OBJECT,
            409: OpenApiTypes.OBJECT,
            503: OpenApiTypes.OBJECT,
        },
        summary="Expand the matrix and queue its planned runs",
        description="Testbeds with a live node are asked for their live topology first: when "
        "it differs from the stored one (or cannot be read) the answer is 409 with the "
        'differences, unless the body says {"override_topology": true} (recorded on the '
        "matrix).",
    )
    @action(detail=True, methods=["post"])
    def launch(self, request, uuid=None):
        matrix = self.get_object()
        if not matrix.can_edit(request.user):
            raise PermissionDenied("Only the owner or staff may launch this matrix.")
        refused = launch_refused(matrix, request.user)
        if refused:
            raise PermissionDenied(f"Nothing was launched: {refused}.")
        override = request.data.get("override_topology") if isinstance(request.data, dict) else None
        if override not in (None, True, False):
            raise ValidationError({"override_topology": "true or false"})
        # Testbeds with a live node are asked whether their cluster still looks as stored.
        checks = livecheck.check_matrix(matrix, request.user)
        if checks and not override:
            raise LiveTopologyDiffers(
                {
                    "detail": "Nothing was launched: the live topology differs from the stored "
                    "one (or could not be read). Launch with override_topology=true to go "
                    "ahead anyway.",
                    "testbeds": [c.as_json() for c in checks],
                }
            )
        try:
            counts = launch(matrix)
            if checks:
                livecheck.record_override(matrix, request.user, checks)
                counts = {**counts, "topology_overridden": [c.as_json() for c in checks]}
        except MatrixError as exc:
            # Nothing was created (expand() checks every cell before it stores any run).
            raise ValidationError({"detail": f"Nothing was launched. {exc}"}) from None
        except dispatching.BrokerUnavailable as exc:
            # The runs that were not sent stay planned: launching again later sends them.
            raise BrokerDown(str(exc)) from None
        return Response(counts)

    def perform_destroy(self, instance):
        try:
            delete_matrix(instance)
        except MatrixBusy as exc:
            raise Conflict(str(exc)) from None


# --- Parts under their parent: /api/<parent>/<uuid>/<part>/ -------------------------------


class PartViewSet(IntegrityAsValidation, viewsets.ModelViewSet):
    """Drives and NICs of a hardware profile; members, targets and pools of a testbed.
    Readable by everyone signed in; written by whoever may edit the parent."""

    lookup_field = "uuid"
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    parent_model: type = HardwareProfile
    parent_field = "profile"
    pagination_class = None
    filter_backends: list = []

    def parent(self):
        if not hasattr(self, "_parent"):
            self._parent = get_object_or_404(self.parent_model, uuid=self.kwargs["parent_uuid"])
        return self._parent

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return self.queryset.none()
        return self.queryset.filter(**{self.parent_field: self.parent()})

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if not getattr(self, "swagger_fake_view", False) and "parent_uuid" in self.kwargs:
            context["parent"] = self.parent()
        return context

    def check_permissions(self, request):
        super().check_permissions(request)
        if request.method not in ("GET", "HEAD", "OPTIONS") and not self.parent().can_edit(
            request.user
        ):
            raise PermissionDenied(
                "Only the owner or staff may change this; published study data is read-only."
            )

    def save_new(self, serializer):
        serializer.save(**{self.parent_field: self.parent()})


def part_viewset(name, model, serializer, parent_model, parent_field, related=()):
    return type(
        name,
        (PartViewSet,),
        {
            "queryset": model.objects.select_related(*related).order_by("id"),
            "serializer_class": serializer,
            "parent_model": parent_model,
            "parent_field": parent_field,
            "__doc__": PartViewSet.__doc__,
        },
    )


PARENT_UUID = OpenApiParameter("parent_uuid", OpenApiTypes.UUID, OpenApiParameter.PATH)
# The viewsets of a parent's parts (drives, NICs, members, targets, pools) by API prefix:
# prefix -> [(route, viewset)], registered as nested routes by api/urls.py.
PART_VIEWSETS = {
    "hardware": [
        (
            "drives",
            part_viewset(
                "DriveViewSet", Drive, serializers.DriveSerializer, HardwareProfile, "profile"
            ),
        ),
        (
            "nics",
            part_viewset("NicViewSet", Nic, serializers.NicSerializer, HardwareProfile, "profile"),
        ),
    ],
    "testbeds": [
        (
            "members",
            part_viewset(
                "TestbedNodeViewSet",
                TestbedNode,
                serializers.TestbedNodeSerializer,
                Testbed,
                "testbed",
                ("node",),
            ),
        ),
        (
            "targets",
            part_viewset(
                "TargetViewSet",
                Target,
                serializers.TargetSerializer,
                Testbed,
                "testbed",
                ("node", "drive", "pool"),
            ),
        ),
        (
            "pools",
            part_viewset(
                "StoragePoolViewSet",
                StoragePool,
                serializers.StoragePoolSerializer,
                Testbed,
                "testbed",
            ),
        ),
    ],
}
for _parts in PART_VIEWSETS.values():
    for _name, _viewset in _parts:
        extend_schema_view(
            **{
                action_name: extend_schema(parameters=[PARENT_UUID])
                for action_name in (
                    "list",
                    "create",
                    "retrieve",
                    "update",
                    "partial_update",
                    "destroy",
                )
            }
        )(_viewset)


# --- Reports and their share links ---------------------------------------------------------


class ReportViewSet(OwnedViewSet):
    """Reports (saved comparisons), most recently updated first. Everyone signed in reads
    them, as on the report pages; their owner and staff change and delete them. Their
    comparison is GET /api/compare/?<full_query>."""

    queryset = Report.objects.select_related("owner").order_by("-updated", "-id")
    serializer_class = serializers.ReportSerializer
    filterset_class = filters.ReportFilter
    ordering_fields = ["title", "created", "updated"]


REPORT_UUID = OpenApiParameter(
    "parent_uuid", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The report's UUID."
)
LINK_ID = OpenApiParameter(
    "id",
    OpenApiTypes.INT,
    OpenApiParameter.PATH,
    description="The share link's ID (not its secret key).",
)


@extend_schema_view(
    list=extend_schema(parameters=[REPORT_UUID], summary="Share links of a report"),
    retrieve=extend_schema(parameters=[REPORT_UUID, LINK_ID]),
    create=extend_schema(
        parameters=[REPORT_UUID], summary="Share the report: freeze its comparison as of now"
    ),
    destroy=extend_schema(
        parameters=[REPORT_UUID, LINK_ID], summary="Revoke the link (it stays listed, revoked)"
    ),
    revoke=extend_schema(
        parameters=[REPORT_UUID, LINK_ID],
        request=None,
        responses={200: serializers.ShareLinkSerializer},
        summary="Revoke the link: its URL answers 404 from now on",
    ),
)
class ShareLinkViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Share links of a report, newest first. Their key opens the report without login, so
    only the report's owner and staff list, create and revoke them; other users get 403.
    A link is never deleted, only revoked (DELETE revokes too): who shared what stays known."""

    queryset = (
        ShareLink.objects.select_related("created_by").defer("snapshot").order_by("-created", "-id")
    )
    serializer_class = serializers.ShareLinkSerializer
    lookup_value_regex = "[0-9]+"
    filter_backends: list = []

    def report(self) -> Report:
        if not hasattr(self, "_report"):
            self._report = get_object_or_404(Report, uuid=self.kwargs["parent_uuid"])
        return self._report

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return self.queryset.none()
        return self.queryset.filter(report=self.report())

    def check_permissions(self, request):
        super().check_permissions(request)
        if not self.report().can_edit(request.user):
            raise PermissionDenied(
                "Only the report's owner or staff may see and manage its share links."
            )

    def perform_create(self, serializer):
        serializer.instance = report_ops.create_share_link(
            self.report(), self.request.user, serializer.validated_data.get("expires_at")
        )

    def perform_destroy(self, instance):
        report_ops.revoke_share_link(instance)

    def finalize_response(self, request, response, *args, **kwargs):
        # The keys open the report without login: never kept by a browser or proxy cache.
        add_never_cache_headers(response)
        return super().finalize_response(request, response, *args, **kwargs)

    @action(detail=True, methods=["post"])
    def revoke(self, request, parent_uuid=None, pk=None):
        link = report_ops.revoke_share_link(self.get_object())
        return Response(self.get_serializer(link).data)


# --- Runs ----------------------------------------------------------------------------------


@extend_schema_view(
    create=extend_schema(
        summary="Store one completed run (raw output parsed on the server, or metrics)",
        request=serializers.IngestRunSerializer,
        responses={201: serializers.RunDetailSerializer, 200: serializers.RunDetailSerializer},
    ),
)
class RunViewSet(
    IntegrityAsValidation,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Runs, newest first (cursor pagination). Creation goes through ingest; afterwards the
    label, notes, tuning set and target may change."""

    lookup_field = "uuid"
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    pagination_class = RunCursorPagination
    filterset_class = filters.RunFilter
    filter_backends = [DjangoFilterBackend]
    parser_classes = [StrictJSONParser, JSONLinesParser]
    max_body_bytes = MAX_REQUEST_BYTES  # read by the parsers: 413 above it

    def get_queryset(self):
        # Joined: what every run has. Fetched apart (one query each, none when no run of
        # the page has one): the target, matrix and node. With all six joined, PostgreSQL
        # spent 50-100 ms planning the 1 ms query of a page (its search over join orders
        # grows with every outer join; measured at 1,000,000 runs with bench/lists.py).
        runs = Run.objects.select_related("owner", "testbed", "tuning_set")
        if self.action == "list":
            runs = runs.defer("raw_output", "effective_config", "launch")
        return runs.prefetch_related(
            "target",
            "matrix",
            "node",
            Prefetch("metrics", Metric.objects.order_by("name", "stat", "iteration", "id")),
        ).order_by("-created", "-id")

    def get_serializer_class(self):
        if self.action == "list":
            return serializers.RunSerializer
        return serializers.RunDetailSerializer

    def create(self, request, *args, **kwargs):
        if not isinstance(request.data, dict):
            raise ValidationError(
                {"detail": "expected one JSON object; send arrays to /api/runs/bulk/"}
            )
        result = ingest([request.data], request.user)[0]
        if result["status"] == "invalid":
            return Response({"errors": result["errors"]}, status=status.HTTP_400_BAD_REQUEST)
        run = self.get_queryset().get(uuid=result["uuid"])
        code = status.HTTP_201_CREATED if result["status"] == "created" else status.HTTP_200_OK
        data = serializers.RunDetailSerializer(run, context=self.get_serializer_context()).data
        if "parts" in result:  # an output of several measurements: a run of each
            data = {**data, "parts": result["parts"]}
        return Response(data, status=code)

    @extend_schema(
        summary="Store many completed runs at once (JSON array or JSON lines)",
        request={
            "application/json": serializers.IngestRunSerializer(many=True),
            "application/x-ndjson": serializers.IngestRunSerializer,
        },
        responses={
            200: serializers.IngestResponseSerializer,
            400: OpenApiTypes.OBJECT,
            413: OpenApiTypes.OBJECT,
        },
    )
    @action(detail=False, methods=["post"], parser_classes=[BulkJSONParser, JSONLinesParser])
    def bulk(self, request):
        try:
            with gc_paused():  # the parse of the body (request.data) too
                try:
                    data, check = request.data, None
                    if isinstance(data, UncheckedJSON):  # checked by the ingest (BulkJSONParser)
                        data, check = data.value, data.check
                    results = ingest(data, request.user, check)
                finally:
                    data = check = None
                    _drop_body(request)
        except IngestError as exc:
            if exc.status == status.HTTP_400_BAD_REQUEST:
                raise ValidationError({"detail": str(exc)}) from None
            return Response({"detail": str(exc)}, status=exc.status)
        counts = {"created": 0, "existing": 0, "invalid": 0}
        for result in results:
            counts[result["status"]] += 1
        return Response({**counts, "results": results})


def _drop_body(request) -> None:
    """Let go of a request's parsed body once the view is done with it. DRF's request is
    in reference cycles (its parser context holds it and the view), so what it holds is
    freed only by a collection of the cyclic GC: a bulk request's body (~60,000 objects)
    would be traversed by the next collections, first while still reachable, and kept in
    memory until a later one. Dropped here, it is freed at once by reference counting.
    (DRF's private attributes: if they are not there, nothing is dropped.)"""
    for name in ("_full_data", "_data"):
        if name in vars(request):
            setattr(request, name, [])


class MetricViewSet(viewsets.ReadOnlyModelViewSet):
    """Metrics in base units, filtered by run, testbed, matrix, name, statistic, primary."""

    queryset = Metric.objects.select_related("run").order_by("id")
    serializer_class = serializers.MetricSerializer
    filterset_class = filters.MetricFilter
    filter_backends = [DjangoFilterBackend]
    pagination_class = type("MetricPagination", (RunCursorPagination,), {"ordering": ("id",)})

    def get_queryset(self):
        return (
            Metric.objects.select_related("run")
            .only(
                "id",
                "name",
                "value",
                "unit",
                "stat",
                "iteration",
                "primary",
                "extra",
                "source_ref",
                "run__uuid",
            )
            .order_by("id")
        )


class WorkerViewSet(viewsets.ReadOnlyModelViewSet):
    """Celery workers as they last reported themselves."""

    queryset = Worker.objects.order_by("hostname", "name")
    serializer_class = serializers.WorkerSerializer
    permission_classes = [StaffWrites]
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    filterset_fields = ["hostname"]
