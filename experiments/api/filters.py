"""Query-string filters of the API lists (django-filter). Related objects by UUID."""

from __future__ import annotations

import datetime

import django_filters as filters
from django.core.exceptions import ValidationError
from django_filters.fields import IsoDateTimeField

from experiments.models import (
    HardwareProfile,
    Matrix,
    Metric,
    Node,
    Report,
    Run,
    Testbed,
    TuningSet,
)
from experiments.models.runs import Tool


class InstantField(IsoDateTimeField):
    """An ISO 8601 instant, in UTC before it reaches the database: PostgreSQL refuses UTC
    offsets beyond 15:59 that Python accepts (``0728-10-28T05:52:15-17:28`` answered 500)."""

    def to_python(self, value):
        value = super().to_python(value)
        if value is None:
            return None
        try:
            return value.astimezone(datetime.UTC)
        except OverflowError:
            raise ValidationError("Date and time out of range.", code="invalid") from None


class InstantFilter(filters.IsoDateTimeFilter):
    field_class = InstantField


class OwnedFilter(filters.FilterSet):
    owner = filters.CharFilter(field_name="owner__username", help_text="Owner's username.")
    name = filters.CharFilter(lookup_expr="icontains", help_text="Part of the name.")


class HardwareProfileFilter(OwnedFilter):
    class Meta:
        model = HardwareProfile
        fields = ["owner", "name", "architecture", "published"]


class NodeFilter(OwnedFilter):
    name = None
    hostname = filters.CharFilter(lookup_expr="icontains")
    profile = filters.UUIDFilter(field_name="profile__uuid")

    class Meta:
        model = Node
        fields = ["owner", "hostname", "profile", "published"]


class TestbedFilter(OwnedFilter):
    class Meta:
        model = Testbed
        fields = ["owner", "name", "fabric", "beegfs_version", "published"]


class TuningSetFilter(OwnedFilter):
    parent = filters.UUIDFilter(field_name="parent__uuid")

    class Meta:
        model = TuningSet
        fields = ["owner", "name", "parent", "published"]


class MatrixFilter(OwnedFilter):
    testbed = filters.UUIDFilter(field_name="testbeds__uuid", distinct=True)

    class Meta:
        model = Matrix
        fields = ["owner", "name", "tool", "testbed"]


class RunFilter(filters.FilterSet):
    owner = filters.CharFilter(field_name="owner__username")
    testbed = filters.UUIDFilter(field_name="testbed__uuid")
    tuning_set = filters.UUIDFilter(field_name="tuning_set__uuid")
    matrix = filters.UUIDFilter(field_name="matrix__uuid")
    tool = filters.ChoiceFilter(choices=Tool.choices)
    status = filters.ChoiceFilter(choices=Run.Status.choices)
    created_after = InstantFilter(field_name="created", lookup_expr="gte")
    created_before = InstantFilter(field_name="created", lookup_expr="lt")
    client_key = filters.CharFilter()
    label = filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Run
        fields = [
            "owner",
            "testbed",
            "tuning_set",
            "matrix",
            "tool",
            "status",
            "published",
            "client_key",
            "label",
        ]


class MetricFilter(filters.FilterSet):
    run = filters.UUIDFilter(field_name="run__uuid")
    testbed = filters.UUIDFilter(field_name="run__testbed__uuid")
    matrix = filters.UUIDFilter(field_name="run__matrix__uuid")

    class Meta:
        model = Metric
        fields = ["run", "testbed", "matrix", "name", "stat", "primary"]


class ReportFilter(filters.FilterSet):
    owner = filters.CharFilter(field_name="owner__username", help_text="Owner's username.")
    title = filters.CharFilter(lookup_expr="icontains", help_text="Part of the title.")
    created_after = InstantFilter(field_name="created", lookup_expr="gte")
    created_before = InstantFilter(field_name="created", lookup_expr="lt")
    updated_after = InstantFilter(field_name="updated", lookup_expr="gte")
    updated_before = InstantFilter(field_name="updated", lookup_expr="lt")

    class Meta:
        model = Report
        fields = [
            "owner",
            "title",
            "created_after",
            "created_before",
            "updated_after",
            "updated_before",
        ]
