"""The API of scheduled matrices and alerts: a matrix's schedule
(``/api/matrices/<uuid>/schedule/``: its owner's and staff's only), one's own subscriptions
(``/api/subscriptions/``) and the alerts one was sent (``/api/alerts/``)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from experiments.alerts.access import subscribe_refused
from experiments.matrices.axes import MatrixError
from experiments.matrices.schedules import delete_schedule, save_schedule
from experiments.models import Alert, Delivery, Matrix, MatrixSchedule, Subscription, Testbed
from experiments.models.alerts import MAX_EVERY_S, MIN_EVERY_S


class FiringSerializer(serializers.Serializer):
    fired_at = serializers.DateTimeField()
    outcome = serializers.CharField()
    reason = serializers.CharField()
    runs = serializers.IntegerField()
    first_repetition = serializers.IntegerField(allow_null=True)
    last_repetition = serializers.IntegerField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    succeeded = serializers.IntegerField()
    failed = serializers.IntegerField()
    missing = serializers.BooleanField()


class ScheduleSerializer(serializers.Serializer):
    cron = serializers.CharField(required=False, allow_blank=True, max_length=100, default="")
    every_s = serializers.IntegerField(
        required=False, allow_null=True, min_value=MIN_EVERY_S, max_value=MAX_EVERY_S, default=None
    )
    enabled = serializers.BooleanField(required=False, default=True)
    deadline_s = serializers.IntegerField(
        required=False, min_value=1, max_value=7 * 24 * 3600, default=6 * 3600
    )
    firings = FiringSerializer(many=True, read_only=True)


def _schedule_data(schedule: MatrixSchedule) -> dict:
    return {
        "cron": schedule.cron,
        "every_s": schedule.every_s,
        "enabled": schedule.enabled,
        "deadline_s": schedule.deadline_s,
        "firings": FiringSerializer(schedule.firings.all()[:20], many=True).data,
    }


class MatrixScheduleView(APIView):
    """GET the matrix's schedule and recent firings (404 when it has none); PUT sets it
    (cron or every_s, enabled: false pauses it); DELETE removes it. The matrix's owner and
    staff only: anyone else gets 403."""

    permission_classes = [IsAuthenticated]
    serializer_class = ScheduleSerializer

    def _matrix(self, request, uuid) -> Matrix:
        matrix = get_object_or_404(Matrix.objects.select_related("owner"), uuid=uuid)
        if not matrix.can_edit(request.user):
            raise PermissionDenied(
                "Only the matrix's owner or staff may see or change its schedule."
            )
        return matrix

    @extend_schema(responses={200: ScheduleSerializer}, summary="The matrix's schedule")
    def get(self, request, uuid):
        schedule = get_object_or_404(MatrixSchedule, matrix=self._matrix(request, uuid))
        return Response(_schedule_data(schedule))

    @extend_schema(
        request=ScheduleSerializer,
        responses={200: ScheduleSerializer},
        summary="Set the matrix's schedule (cron or every_s; enabled false pauses it)",
    )
    def put(self, request, uuid):
        matrix = self._matrix(request, uuid)
        serializer = ScheduleSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            schedule = save_schedule(
                matrix,
                cron=data.get("cron") or "",
                every_s=data.get("every_s"),
                enabled=data["enabled"],
                deadline_s=data["deadline_s"],
            )
        except MatrixError as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        return Response(_schedule_data(schedule))

    @extend_schema(responses={204: None}, summary="Remove the matrix's schedule")
    def delete(self, request, uuid):
        schedule = get_object_or_404(MatrixSchedule, matrix=self._matrix(request, uuid))
        delete_schedule(schedule)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SubscriptionSerializer(serializers.ModelSerializer):
    testbed = serializers.SlugRelatedField(
        slug_field="uuid", queryset=Testbed.objects.all(), required=False, allow_null=True
    )
    matrix = serializers.SlugRelatedField(
        slug_field="uuid", queryset=Matrix.objects.all(), required=False, allow_null=True
    )
    webhook_url = serializers.URLField(required=False, allow_blank=True, max_length=500)

    class Meta:
        model = Subscription
        fields = ["uuid", "testbed", "matrix", "email", "webhook_url", "secret", "created"]
        read_only_fields = ["uuid", "secret", "created"]

    def validate_webhook_url(self, value: str) -> str:
        if value and not value.lower().startswith(("http://", "https://")):
            raise serializers.ValidationError("A webhook URL starts with http:// or https://.")
        return value

    def validate(self, attrs):
        testbed, matrix = attrs.get("testbed"), attrs.get("matrix")
        if bool(testbed) == bool(matrix):
            raise serializers.ValidationError("Name one testbed or one matrix.")
        if not attrs.get("email") and not attrs.get("webhook_url"):
            raise serializers.ValidationError("Give an email, a webhook_url or both.")
        refused = subscribe_refused(self.context["request"].user, testbed=testbed, matrix=matrix)
        if refused:
            raise PermissionDenied(f"You cannot subscribe: {refused}.")
        return attrs


class SubscriptionViewSet(
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """One's own subscriptions (another user's are not found): list, create, delete."""

    queryset = Subscription.objects.none()  # the schema's type of uuid; get_queryset answers
    serializer_class = SubscriptionSerializer
    permission_classes = [IsAuthenticated]
    lookup_field = "uuid"
    filter_backends: list = []

    def get_queryset(self):
        return (
            Subscription.objects.filter(user=self.request.user)
            .select_related("testbed", "matrix")
            .order_by("-created", "-pk")
        )

    def perform_create(self, serializer):
        serializer.save(user=self.request.user)


class DeliverySerializer(serializers.ModelSerializer):
    class Meta:
        model = Delivery
        fields = ["uuid", "channel", "target", "status", "attempts", "last_error", "sent_at"]


class AlertSerializer(serializers.ModelSerializer):
    testbed = serializers.SlugRelatedField(slug_field="uuid", read_only=True)
    matrix = serializers.SlugRelatedField(slug_field="uuid", read_only=True)
    deliveries = serializers.SerializerMethodField()

    class Meta:
        model = Alert
        fields = [
            "uuid", "key", "kind", "testbed", "matrix", "subject", "text", "data", "created",
            "deliveries",
        ]  # fmt: skip

    @extend_schema(responses=DeliverySerializer(many=True))
    def get_deliveries(self, alert) -> list:
        user = self.context["request"].user
        return DeliverySerializer(
            [d for d in alert.deliveries.all() if d.user_id == user.pk], many=True
        ).data


class AlertViewSet(viewsets.ReadOnlyModelViewSet):
    """The alerts sent to the user, newest first, each with the user's own deliveries."""

    queryset = Alert.objects.none()  # the schema's type of uuid; get_queryset answers
    serializer_class = AlertSerializer
    permission_classes = [IsAuthenticated]
    lookup_field = "uuid"
    filter_backends: list = []

    def get_queryset(self):
        return (
            Alert.objects.filter(deliveries__user=self.request.user)
            .distinct()
            .select_related("testbed", "matrix")
            .prefetch_related("deliveries")
            .order_by("-created", "-pk")
        )
