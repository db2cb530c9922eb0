"""GET /api/changes/: the change points of every configuration's history, and
POST /api/changes/<id>/state/: acknowledge, mute or mark one expected (docs/design-notes.md,
"Change points": a stable interface).

Every signed-in user reads them, as runs (the lab's shared results); changing a state needs
the testbed's operators (its owner, staff, the users and groups it grants), as launching
on it does."""

from __future__ import annotations

import django_filters as filters
from django.db import transaction
from django.utils import timezone
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from experiments.api.pagination import RunCursorPagination
from experiments.models import ChangePoint

NOTE_MAX = 2000


class ChangeFilter(filters.FilterSet):
    testbed = filters.UUIDFilter(field_name="testbed__uuid", help_text="Testbed UUID.")
    matrix = filters.UUIDFilter(field_name="matrix__uuid", help_text="Matrix UUID.")
    metric = filters.CharFilter(help_text="Metric name, e.g. write_bw.")
    state = filters.ChoiceFilter(choices=ChangePoint.State.choices)
    configuration = filters.CharFilter(
        field_name="config_key", help_text="Configuration key (32 hexadecimal digits)."
    )
    run = filters.UUIDFilter(field_name="run__uuid", help_text="First run after the change.")

    class Meta:
        model = ChangePoint
        fields = ["testbed", "matrix", "metric", "state", "configuration", "run"]


class SegmentSerializer(serializers.Serializer):
    mean = serializers.FloatField()
    n = serializers.IntegerField()
    interval = serializers.ListField(
        child=serializers.FloatField(),
        allow_null=True,
        help_text="95 % t interval of the mean [low, high]; null for one run.",
    )


class ConfigurationSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="The alike-runs identity (Run.config_key).")
    text = serializers.CharField(help_text="Tool, parameters, testbed, target, tuning set.")
    tool = serializers.CharField()
    testbed = serializers.UUIDField()
    testbed_name = serializers.CharField()
    matrix = serializers.UUIDField(allow_null=True)


class DifferenceItemSerializer(serializers.Serializer):
    area = serializers.CharField(help_text="hardware, testbed, node, run or tuning.")
    what = serializers.CharField(help_text='e.g. "stor1: kernel", "tool version".')
    before = serializers.CharField()
    after = serializers.CharField()


class DifferencesSerializer(serializers.Serializer):
    items = DifferenceItemSerializer(many=True)
    nothing_changed = serializers.BooleanField()
    summary = serializers.CharField()
    verdicts = serializers.DictField(
        child=serializers.DictField(child=serializers.IntegerField()),
        help_text="Telemetry verdicts (bottleneck kinds) counted over the runs before and after.",
    )
    runs_compared = serializers.DictField(child=serializers.IntegerField())


class ChangePointSerializer(serializers.Serializer):
    """A change point as ``ChangePoint.as_api`` gives it (the webhook sends the same)."""

    id = serializers.UUIDField()
    metric = serializers.CharField()
    unit = serializers.CharField(allow_blank=True)
    configuration = ConfigurationSerializer()
    run = serializers.UUIDField(help_text="The first run after the change.")
    previous_run = serializers.UUIDField(help_text="The last run before it.")
    at = serializers.DateTimeField(help_text="When the first run after it started.")
    before = SegmentSerializer()
    after = SegmentSerializer()
    shift = serializers.FloatField(allow_null=True, help_text="after / before - 1.")
    p_value = serializers.FloatField(help_text="The permutation test's p-value.")
    method = serializers.CharField()
    differences = DifferencesSerializer()
    state = serializers.ChoiceField(choices=ChangePoint.State.choices)
    state_note = serializers.CharField(allow_blank=True)
    state_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    announced_at = serializers.DateTimeField(allow_null=True)

    def to_representation(self, instance: ChangePoint) -> dict:
        return instance.as_api()


class StateSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=ChangePoint.State.choices)
    note = serializers.CharField(max_length=NOTE_MAX, allow_blank=True, required=False, default="")


def may_change(user, cp: ChangePoint) -> bool:
    """Whether ``user`` may set ``cp``'s state: an operator of its testbed."""
    return cp.testbed.can_operate(user)


def set_state(cp: ChangePoint, user, state: str, note: str) -> ChangePoint:
    """Store the lab's answer (who, when, note) in one UPDATE."""
    now = timezone.now()
    with transaction.atomic():
        ChangePoint.objects.filter(pk=cp.pk).update(
            state=state, state_by=user, state_at=now, state_note=note
        )
    cp.state, cp.state_by, cp.state_at, cp.state_note = state, user, now, note
    return cp


class ChangePointViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Change points of every configuration's history, newest first (cursor pagination)."""

    serializer_class = ChangePointSerializer
    # Reading needs a signed-in user; ``state`` checks the testbed's operators itself (the
    # default OwnerOrStaffWrites would allow its owner only).
    permission_classes = [IsAuthenticated]
    lookup_field = "uuid"
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    filterset_class = ChangeFilter
    filter_backends = [DjangoFilterBackend]
    pagination_class = type(
        "ChangePagination", (RunCursorPagination,), {"ordering": ("-at", "-id")}
    )

    def get_queryset(self):
        return (
            ChangePoint.objects.filter(testbed__published=False)
            .select_related("testbed", "matrix")
            .prefetch_related("run", "previous_run")
            .order_by("-at", "-id")
        )

    @extend_schema(
        summary="Acknowledge, mute or mark a change point expected (with a note)",
        request=StateSerializer,
        responses={200: ChangePointSerializer},
    )
    @action(detail=True, methods=["post"])
    def state(self, request, uuid=None):
        cp = self.get_object()
        if not may_change(request.user, cp):
            raise PermissionDenied("Only an operator of the change point's testbed may change it.")
        body = StateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        set_state(cp, request.user, body.validated_data["state"], body.validated_data["note"])
        return Response(ChangePointSerializer(cp).data)
