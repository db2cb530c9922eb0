"""Serializers of the API. Objects and their relations are named by UUID, never by primary key;
owners by username. Validation follows the forms of the pages (experiments/forms.py)."""

from __future__ import annotations

import uuid as uuidlib
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from experiments.comparison import ComparisonSpec
from experiments.comparison import reports as report_ops
from experiments.matrices.validation import FIELDS, MatrixInvalid, validate_matrix
from experiments.models import (
    Drive,
    HardwareProfile,
    Matrix,
    Metric,
    MirrorGroup,
    Nic,
    Node,
    Report,
    Run,
    ShareLink,
    StoragePool,
    Target,
    Testbed,
    TestbedNode,
    TuningParameter,
    TuningSet,
    Worker,
)
from experiments.results.ingest import _has_nul
from experiments.results.telemetry import for_run as telemetry_docs
from experiments.shared.tuning_keys import TuningValueError, normalise
from experiments.shared.validators import usable_problem, work_path_problem
from runners.tools import ADAPTERS


@extend_schema_field(OpenApiTypes.UUID)
class UUIDRelatedField(serializers.SlugRelatedField):
    """A related object by its UUID; a malformed UUID is a validation error, not a crash."""

    def __init__(self, **kwargs):
        super().__init__(slug_field="uuid", **kwargs)

    def to_internal_value(self, data):
        try:
            uuidlib.UUID(str(data))
        except (TypeError, ValueError, AttributeError):
            self.fail("invalid")
        return super().to_internal_value(data)


class SafeJSONField(serializers.JSONField):
    """JSON that PostgreSQL's jsonb accepts (no NUL characters) and that nests sanely."""

    def to_internal_value(self, data):
        data = super().to_internal_value(data)
        if _has_nul(data):
            raise serializers.ValidationError(
                "must not contain NUL characters or nest deeper than 20 levels"
            )
        return data


class OwnedSerializer(serializers.ModelSerializer):
    """uuid, owner (username, read-only), timestamps, and whether the caller may edit."""

    uuid = serializers.UUIDField(read_only=True)
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True)
    can_edit = serializers.SerializerMethodField()

    def get_can_edit(self, obj) -> bool:
        request = self.context.get("request")
        return bool(request and obj.can_edit(request.user))


OWNED = ["uuid", "owner", "can_edit", "created", "updated"]
PUBLISHED = ["published", "source", "source_ref"]


def _json_fields(serializer_cls):
    """ModelSerializer maps JSONField to serializers.JSONField; use the safe one."""
    from django.db import models

    serializer_cls.serializer_field_mapping = {
        **serializer_cls.serializer_field_mapping,
        models.JSONField: SafeJSONField,
    }
    return serializer_cls


# --- Hardware ------------------------------------------------------------------------------


class DriveSerializer(serializers.ModelSerializer):
    uuid = serializers.UUIDField(read_only=True)

    class Meta:
        model = Drive
        fields = [
            "uuid",
            "kind",
            "model",
            "count",
            "capacity_gb",
            "interface",
            "pcie_gen",
            "pcie_lanes",
            "seq_read_mbps",
            "seq_write_mbps",
            "rand_read_iops",
            "rand_write_iops",
            "purpose",
        ]

    def validate(self, data):
        merged = {**({f: getattr(self.instance, f) for f in data} if self.instance else {}), **data}
        if self.instance is not None:
            for f in ("interface", "pcie_gen", "pcie_lanes"):
                merged.setdefault(f, getattr(self.instance, f))
        if merged.get("interface") == "pcie" and not (
            merged.get("pcie_gen") and merged.get("pcie_lanes")
        ):
            raise serializers.ValidationError(
                {"pcie_lanes": "PCIe drives need a generation and a lane count."}
            )
        return data


class NicSerializer(serializers.ModelSerializer):
    uuid = serializers.UUIDField(read_only=True)

    class Meta:
        model = Nic
        fields = [
            "uuid",
            "kind",
            "model",
            "rate_gbps",
            "ports",
            "count",
            "usable_gbytes",
            "usable_source",
        ]

    def validate(self, data):
        merged = {
            f: data[f] if f in data else getattr(self.instance, f, None)
            for f in ("rate_gbps", "usable_gbytes")
        }
        problem = usable_problem(merged["rate_gbps"], merged["usable_gbytes"])
        if problem:
            raise serializers.ValidationError({"usable_gbytes": problem})
        return data


class HardwareProfileSerializer(OwnedSerializer):
    drives = DriveSerializer(many=True, read_only=True)
    nics = NicSerializer(many=True, read_only=True)

    class Meta:
        model = HardwareProfile
        fields = [
            *OWNED,
            *PUBLISHED,
            "name",
            "vendor",
            "model",
            "architecture",
            "cpu_model",
            "sockets",
            "cores_per_socket",
            "threads_per_core",
            "clock_ghz",
            "numa_domains",
            "memory_gib",
            "memory_channels",
            "dimm_type",
            "raid_controller",
            "tdp_watts",
            "notes",
            "drives",
            "nics",
        ]
        read_only_fields = PUBLISHED


# --- Nodes ---------------------------------------------------------------------------------


class NodeSerializer(OwnedSerializer):
    profile = UUIDRelatedField(queryset=HardwareProfile.objects.all())

    class Meta:
        model = Node
        fields = [
            *OWNED,
            *PUBLISHED,
            "hostname",
            "profile",
            "address",
            "os",
            "kernel",
            "notes",
            "shared",
        ]
        read_only_fields = PUBLISHED

    def validate_hostname(self, value: str) -> str:
        value = value.strip()
        request = self.context["request"]
        owner = self.instance.owner if self.instance else request.user
        clash = Node.objects.filter(owner=owner, hostname=value)
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise serializers.ValidationError("You already have a node with this hostname.")
        return value


# --- Testbeds ------------------------------------------------------------------------------


class TestbedNodeSerializer(serializers.ModelSerializer):
    uuid = serializers.UUIDField(read_only=True)
    node = UUIDRelatedField(queryset=Node.objects.all())
    hostname = serializers.CharField(source="node.hostname", read_only=True)

    class Meta:
        model = TestbedNode
        fields = [
            "uuid",
            "node",
            "hostname",
            "management",
            "metadata",
            "storage",
            "client",
            "monitoring",
            "storage_links",
        ]

    def validate(self, data):
        roles = {r: data.get(r, getattr(self.instance, r, False)) for r in TestbedNode.ROLES}
        if not any(roles.values()):
            raise serializers.ValidationError("Give the node at least one role.")
        testbed = self.context.get("parent")
        node = data.get("node")
        _check_node_joins(self, testbed, node)
        if testbed is not None and node is not None:
            problem = testbed.member_clash(node, exclude_pk=getattr(self.instance, "pk", None))
            if problem:
                raise serializers.ValidationError({"node": problem})
        return data


def _check_node_joins(serializer, testbed, node) -> None:
    """A node joins another user's testbed only if its owner shares it (or staff adds it)."""
    if testbed is None or node is None:
        return
    if serializer.instance is not None and serializer.instance.node_id == node.pk:
        return  # unchanged: it joined when that was allowed
    request = serializer.context.get("request")
    problem = testbed.node_refused(node, request.user if request else None)
    if problem:
        raise serializers.ValidationError({"node": problem})


class StoragePoolSerializer(serializers.ModelSerializer):
    uuid = serializers.UUIDField(read_only=True)

    class Meta:
        model = StoragePool
        fields = ["uuid", "pool_id", "name"]

    def validate_pool_id(self, value):
        testbed = self.context.get("parent")
        if testbed is not None:
            clash = testbed.pools.filter(pool_id=value)
            if self.instance is not None:
                clash = clash.exclude(pk=self.instance.pk)
            if clash.exists():
                raise serializers.ValidationError("This testbed already has a pool with this ID.")
        return value


class TargetSerializer(serializers.ModelSerializer):
    uuid = serializers.UUIDField(read_only=True)
    node = UUIDRelatedField(queryset=Node.objects.all(), required=False, allow_null=True)
    drive = UUIDRelatedField(queryset=Drive.objects.all(), required=False, allow_null=True)
    pool = UUIDRelatedField(queryset=StoragePool.objects.all(), required=False, allow_null=True)

    class Meta:
        model = Target
        fields = [
            "uuid",
            "kind",
            "node",
            "target_id",
            "name",
            "count",
            "numa_domain",
            "raid_level",
            "disks",
            "drive",
            "filesystem",
            "mount_options",
            "path",
            "capacity_gb",
            "pool",
        ]

    def validate(self, data):
        testbed = self.context.get("parent")
        if testbed is not None:
            if data.get("node") and not testbed.members.filter(node=data["node"]).exists():
                raise serializers.ValidationError({"node": "The node is not in this testbed."})
            _check_node_joins(self, testbed, data.get("node"))
            if data.get("pool") and data["pool"].testbed_id != testbed.pk:
                raise serializers.ValidationError({"pool": "The pool is not in this testbed."})
        level = data.get("raid_level", getattr(self.instance, "raid_level", None))
        disks = data.get("disks", getattr(self.instance, "disks", None))
        minimum = {"1": 2, "5": 3, "6": 4, "10": 4}.get(level or "")
        if minimum and disks and disks < minimum:
            raise serializers.ValidationError(
                {"disks": f"RAID{level} needs at least {minimum} disks."}
            )
        if level == "10" and disks and disks % 2:
            raise serializers.ValidationError({"disks": "RAID10 needs an even number of disks."})
        if level == "none" and disks and disks != 1:
            raise serializers.ValidationError({"disks": "A target without RAID has one disk."})
        return data


class MirrorGroupSerializer(serializers.ModelSerializer):
    uuid = serializers.UUIDField(read_only=True)
    primary = serializers.SlugRelatedField(slug_field="uuid", read_only=True)
    secondary = serializers.SlugRelatedField(slug_field="uuid", read_only=True)

    class Meta:
        model = MirrorGroup
        fields = ["uuid", "kind", "group_id", "primary", "secondary"]


class TestbedSerializer(OwnedSerializer):
    operators = serializers.SlugRelatedField(
        slug_field="username",
        queryset=get_user_model().objects.all(),
        many=True,
        required=False,
        help_text="Users (by username) besides the owner and staff who may launch on the "
        "testbed and store runs in it. Only the owner and staff change this.",
    )
    operator_groups = serializers.SlugRelatedField(
        slug_field="name",
        queryset=Group.objects.all(),
        many=True,
        required=False,
        help_text="Groups (by name) whose members may launch on the testbed and store runs in it.",
    )
    members = TestbedNodeSerializer(many=True, read_only=True)
    targets = TargetSerializer(many=True, read_only=True)
    pools = StoragePoolSerializer(many=True, read_only=True)
    mirror_groups = MirrorGroupSerializer(many=True, read_only=True)
    live_node = serializers.SlugRelatedField(
        slug_field="hostname",
        read_only=True,
        help_text="The node whose worker reads the live BeeGFS topology (set by "
        "POST live-topology/ with save); a launch checks the live cluster first.",
    )

    class Meta:
        model = Testbed
        fields = [
            *OWNED,
            *PUBLISHED,
            "name",
            "description",
            "beegfs_version",
            "fabric",
            "switch",
            "network_notes",
            "benchmark_dir",
            "slurm_partition",
            "slurm_account",
            "operators",
            "operator_groups",
            "members",
            "targets",
            "pools",
            "mirror_groups",
            "live_node",
            "live_imported_at",
        ]
        read_only_fields = [*PUBLISHED, "live_imported_at"]

    def validate_benchmark_dir(self, value: str) -> str:
        path = value.strip()
        problem = work_path_problem(path) if path else None
        if problem:
            raise serializers.ValidationError(problem)
        return path


# --- Tuning --------------------------------------------------------------------------------


class TuningParameterSerializer(serializers.ModelSerializer):
    normalized = serializers.JSONField(read_only=True)
    known = serializers.BooleanField(read_only=True)

    class Meta:
        model = TuningParameter
        fields = ["scope", "key", "value", "normalized", "known"]
        # Uniqueness is checked over the whole list in TuningSetSerializer.validate_params.
        validators: list = []


class TuningSetSerializer(OwnedSerializer):
    parent = UUIDRelatedField(queryset=TuningSet.objects.all(), required=False, allow_null=True)
    params = TuningParameterSerializer(
        many=True,
        required=False,
        help_text="This set's own parameters; writing them "
        "replaces all of them and records a revision.",
    )
    effective = serializers.JSONField(read_only=True)
    revision = serializers.IntegerField(read_only=True)

    class Meta:
        model = TuningSet
        fields = [
            *OWNED,
            *PUBLISHED,
            "name",
            "description",
            "parent",
            "revision",
            "params",
            "effective",
        ]
        read_only_fields = PUBLISHED

    def validate_params(self, value: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
        entries, seen, errors = [], set(), []
        for item in value:
            scope, key, raw = item["scope"], item["key"].strip(), item["value"]
            if not key:
                errors.append("a key must not be empty")
                continue
            if (scope, key) in seen:
                errors.append(f"{scope}.{key} is given twice")
                continue
            seen.add((scope, key))
            try:
                normalise(scope, key, raw)
            except TuningValueError as exc:
                errors.append(f"{scope}.{key}: {exc}")
                continue
            entries.append((scope, key, raw))
        if errors:
            raise serializers.ValidationError(errors)
        return entries

    def validate_parent(self, value):
        if value is not None and self.instance is not None:
            if self.instance.pk in {value.pk, *(t.pk for t in value.ancestors())}:
                raise serializers.ValidationError(
                    "A set can not inherit from itself or its descendants."
                )
        return value

    def create(self, validated_data):
        entries = validated_data.pop("params", [])
        tuning_set = super().create(validated_data)
        tuning_set.replace_params(entries, author=self.context["request"].user)
        return tuning_set

    def update(self, instance, validated_data):
        entries = validated_data.pop("params", None)
        tuning_set = super().update(instance, validated_data)
        if entries is not None:
            tuning_set.replace_params(entries, author=self.context["request"].user)
        else:
            tuning_set.refresh_effective()
        return tuning_set


# --- Matrices ------------------------------------------------------------------------------


@_json_fields
class MatrixSerializer(OwnedSerializer):
    testbeds = UUIDRelatedField(queryset=Testbed.objects.all(), many=True)
    tuning_sets = UUIDRelatedField(queryset=TuningSet.objects.all(), many=True, required=False)
    tool = serializers.ChoiceField(choices=sorted(ADAPTERS))
    launched_at = serializers.DateTimeField(read_only=True)

    class Meta:
        model = Matrix
        fields = [
            *OWNED,
            "name",
            "description",
            "tool",
            "launch_mode",
            "tasks_per_node",
            "fixed_params",
            "axes",
            "exclusions",
            "testbeds",
            "tuning_sets",
            "repetitions",
            "max_repetitions",
            "target_cv",
            "order",
            "order_seed",
            "drop_caches",
            "apply_tuning",
            "timeout_s",
            "launched_at",
        ]

    def validate_testbeds(self, value):
        """Only the testbeds' operators plan matrices on them (published ones take no runs)."""
        request = self.context.get("request")
        if request is not None:
            for testbed in value:
                problem = testbed.runs_refused(request.user)
                if problem:
                    raise serializers.ValidationError(problem)
        return value

    def to_internal_value(self, data):
        """Field errors (``repetitions: 0``, an unknown testbed) stop DRF before
        :meth:`validate`; the definition's other fields are checked too, so that one answer
        lists every problem."""
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if self.partial or not isinstance(exc.detail, dict) or not hasattr(data, "get"):
                raise
            definition = {k: data[k] for k in FIELDS if k in data and k not in exc.detail}
            # Only whether testbeds are given matters without building the cells.
            definition["testbeds"] = list(data.get("testbeds") or [])
            definition["tuning_sets"] = []
            try:
                validate_matrix(definition, build_cells=False)
            except MatrixInvalid as more:
                errors = {k: v for k, v in more.errors.items() if k not in exc.detail}
                raise serializers.ValidationError({**errors, **exc.detail}) from None
            raise

    def validate(self, data):
        """The definition goes through matrix_validation.validate_matrix, as the page's and
        YAML files' do (a partial update is checked as the whole it makes)."""
        definition = {}
        for key in FIELDS:
            if key in data:
                definition[key] = data[key]
            elif self.instance is not None:
                value = getattr(self.instance, key)
                if key in ("testbeds", "tuning_sets"):
                    value = list(value.all())
                definition[key] = value
        try:
            clean = validate_matrix(definition)
        except MatrixInvalid as exc:
            raise serializers.ValidationError(exc.errors) from None
        for key in ("name", "description", "fixed_params", "axes", "exclusions"):
            if key in data:
                data[key] = clean[key]
        return data


# --- Runs and metrics ----------------------------------------------------------------------


class MetricSerializer(serializers.ModelSerializer):
    run = serializers.SlugRelatedField(slug_field="uuid", read_only=True)

    class Meta:
        model = Metric
        fields = [
            "run",
            "name",
            "value",
            "unit",
            "stat",
            "iteration",
            "primary",
            "extra",
            "source_ref",
        ]
        read_only_fields = fields


class RunMetricSerializer(serializers.ModelSerializer):
    class Meta:
        model = Metric
        fields = ["name", "value", "unit", "stat", "iteration", "primary", "extra"]
        read_only_fields = fields


RUN_READ_ONLY = [
    "tool",
    "tool_version",
    "status",
    "command",
    "argv",
    "params",
    "exit_code",
    "started_at",
    "finished_at",
    "matrix",
    "cell_key",
    "repetition",
    "node",
    "attempts",
    "worker",
    "error",
    "parse_error",
    "queued_at",
    "client_key",
    "published",
    "source",
    "source_ref",
]


@_json_fields
class RunSerializer(OwnedSerializer):
    """A run. Runs are created by matrices and by ingest (POST /api/runs/ or /api/runs/bulk/);
    afterwards only the label, notes, tuning set and target may change."""

    testbed = serializers.SlugRelatedField(slug_field="uuid", read_only=True)
    testbed_name = serializers.CharField(source="testbed.name", read_only=True)
    tuning_set = UUIDRelatedField(queryset=TuningSet.objects.all(), required=False, allow_null=True)
    target = UUIDRelatedField(queryset=Target.objects.all(), required=False, allow_null=True)
    matrix = serializers.SlugRelatedField(slug_field="uuid", read_only=True)
    node = serializers.SlugRelatedField(slug_field="uuid", read_only=True)
    metrics = RunMetricSerializer(many=True, read_only=True)

    class Meta:
        model = Run
        fields = [
            *OWNED,
            "testbed",
            "testbed_name",
            "tuning_set",
            "target",
            "tool",
            "tool_version",
            "label",
            "status",
            "command",
            "argv",
            "params",
            "exit_code",
            "started_at",
            "finished_at",
            "notes",
            "matrix",
            "cell_key",
            "repetition",
            "node",
            "attempts",
            "worker",
            "error",
            "parse_error",
            "queued_at",
            "client_key",
            "published",
            "source",
            "source_ref",
            "metrics",
        ]
        read_only_fields = RUN_READ_ONLY

    def validate_target(self, value):
        if (
            value is not None
            and self.instance is not None
            and value.testbed_id != self.instance.testbed_id
        ):
            raise serializers.ValidationError("The target is not in the run's testbed.")
        return value


# Slurm launch mode (runners.slurm): the job, its state and reason, the nodes it allocated.
SLURM = ["slurm_job_id", "slurm_state", "slurm_reason", "slurm_nodes"]


class RunDetailSerializer(RunSerializer):
    telemetry = serializers.SerializerMethodField(
        help_text="Per node: the run's telemetry and the tool's own time series, in the "
        "format of docs/telemetry.md (beeweb-telemetry/1)."
    )

    class Meta(RunSerializer.Meta):
        fields = [
            *RunSerializer.Meta.fields,
            "raw_output",
            "effective_config",
            "launch",
            *SLURM,
            "telemetry",
        ]
        read_only_fields = [*RUN_READ_ONLY, "raw_output", "effective_config", "launch", *SLURM]

    @extend_schema_field({"type": "array", "items": {"type": "object"}})
    def get_telemetry(self, obj) -> list[dict[str, Any]]:
        return telemetry_docs(obj)


# --- Ingest (schema of POST /api/runs/ and /api/runs/bulk/) ---------------------------------


class IngestMetricSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="A name of DESIGN.md's vocabulary, e.g. write_bw.")
    value = serializers.FloatField(help_text="In base units (B/s, op/s, s, B).")
    unit = serializers.CharField(required=False, help_text="Must be the name's base unit.")
    stat = serializers.CharField(required=False, default="value")
    iteration = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    extra = serializers.DictField(required=False)
    source_ref = serializers.CharField(required=False, allow_blank=True)


class IngestRunSerializer(serializers.Serializer):
    """One completed run to store (documentation of the bulk format; the ingest module
    validates items itself, faster than a serializer per item)."""

    key = serializers.CharField(
        required=False, max_length=200, help_text="Idempotency key, unique per user."
    )
    testbed = serializers.CharField(help_text="Testbed UUID or name.")
    tuning_set = serializers.CharField(required=False, help_text="Tuning set UUID or name.")
    tool = serializers.CharField(
        required=False,
        help_text="Tool name; detected from raw_output when omitted. Required with metrics.",
    )
    op = serializers.CharField(required=False, help_text="Parser option (IOR's --op).")
    label = serializers.CharField(required=False, max_length=200)
    notes = serializers.CharField(required=False)
    params = serializers.DictField(required=False)
    raw_output = serializers.CharField(
        required=False,
        help_text="The tool's output: stored as given, then parsed. Send a file of several "
        "independent measurements (fio stonewall groups, an IOR or mdtest log of several "
        "runs) whole, as one item: one run is stored per measurement (the answer's parts).",
    )
    metrics = IngestMetricSerializer(many=True, required=False)
    tool_version = serializers.CharField(required=False, max_length=60)
    command = serializers.CharField(required=False)
    exit_code = serializers.IntegerField(required=False, allow_null=True)
    started_at = serializers.DateTimeField(required=False, allow_null=True)
    finished_at = serializers.DateTimeField(required=False, allow_null=True)
    status = serializers.ChoiceField(choices=["imported", "succeeded", "failed"], required=False)
    telemetry = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="beeweb-telemetry/1 documents, one per node (docs/telemetry.md); "
        "validated strictly, stored with the run, and its bottleneck verdict computed.",
    )


class IngestPartSerializer(serializers.Serializer):
    uuid = serializers.UUIDField()
    label = serializers.CharField(help_text="The part's name in the output (a fio job's).")
    metrics = serializers.IntegerField(required=False)
    parse_error = serializers.CharField(required=False)


class IngestResultSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["created", "existing", "invalid"])
    uuid = serializers.UUIDField(required=False)
    metrics = serializers.IntegerField(required=False)
    parse_error = serializers.CharField(required=False)
    errors = serializers.DictField(child=serializers.CharField(), required=False)
    held = serializers.CharField(
        required=False,
        help_text="With parts: what the output holds, e.g. '15 independent jobs (bs 1k … 16M)'.",
    )
    parts = IngestPartSerializer(
        many=True,
        required=False,
        help_text="When raw_output holds several independent measurements (fio jobs in "
        "different stonewall groups, the runs of an IOR or mdtest log): the run of each, in "
        "the output's order, the first being ``uuid``. Each holds the whole raw output.",
    )


class IngestResponseSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    existing = serializers.IntegerField()
    invalid = serializers.IntegerField()
    results = IngestResultSerializer(many=True)


# --- Reports and share links ---------------------------------------------------------------

CHART_KEYS = sorted(ComparisonSpec().chart_settings())


class ReportSerializer(OwnedSerializer):
    """A saved comparison. ``query`` is the comparison's query string (that of /compare/ and
    /api/compare/); chart settings given in it are moved to ``chart``. Writing ``query``
    without ``chart`` takes the chart settings from the query, as the report page does."""

    title = serializers.CharField(max_length=200)
    query = serializers.CharField(
        allow_blank=True,
        trim_whitespace=True,
        help_text="Metrics, axes and filters as the compare page's URL holds them, e.g. "
        "metric=write_bw&x=param:threads&series=raid.",
    )
    chart = serializers.DictField(
        child=serializers.CharField(allow_blank=True),
        required=False,
        help_text=f"Chart settings ({', '.join(CHART_KEYS)}); unknown values fall back to "
        "the defaults.",
    )
    full_query = serializers.SerializerMethodField(
        help_text="query plus chart settings: the query string for /api/compare/."
    )
    url = serializers.SerializerMethodField(help_text="The report's page.")

    class Meta:
        model = Report
        fields = [*OWNED, "title", "description", "query", "chart", "full_query", "url"]

    def get_full_query(self, obj) -> str:
        return report_ops.full_query(obj)

    @extend_schema_field(OpenApiTypes.URI)
    def get_url(self, obj) -> str:
        request = self.context.get("request")
        path = obj.get_absolute_url()
        return request.build_absolute_uri(path) if request else path

    def validate_title(self, value: str) -> str:
        value = value.strip()
        if not value:
            raise serializers.ValidationError("A report needs a title.")
        return value

    def validate_chart(self, value: dict) -> dict:
        unknown = sorted(set(value) - set(CHART_KEYS))
        if unknown:
            raise serializers.ValidationError(
                f"unknown chart settings: {', '.join(unknown)} (known: {', '.join(CHART_KEYS)})"
            )
        return value

    def validate(self, data):
        if "query" not in data and "chart" not in data:
            return data
        if "query" in data:
            query = data["query"]
            chart = data.get("chart", {})
        else:
            query, chart = self.instance.query, data["chart"]
        # Chart settings given apart win over those in the query (QueryDict.get: last value).
        extra = urlencode([(k, v) for k, v in chart.items() if v not in ("", None)])
        spec = ComparisonSpec.from_query("&".join(p for p in (query.lstrip("?"), extra) if p))
        if spec.errors:
            raise serializers.ValidationError({"query": spec.errors})
        if not spec.metrics:
            raise serializers.ValidationError({"query": ["Give at least one metric (metric=...)."]})
        data["query"] = report_ops.data_query(spec)
        data["chart"] = report_ops.chart_settings(spec)
        return data


class ShareLinkSerializer(serializers.ModelSerializer):
    """A share link: ``url`` opens the report without login, read-only, frozen as it was
    when the link was made. The key in it is the secret: only the report's owner and staff
    see it."""

    expires_at = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text=f"When the link stops working; empty: never (at most "
        f"{report_ops.MAX_EXPIRY_DAYS} days ahead).",
    )
    created_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    state = serializers.ChoiceField(choices=["active", "expired", "revoked"], read_only=True)
    url = serializers.SerializerMethodField(help_text="The public share page.")
    export_url = serializers.SerializerMethodField(help_text="The frozen data as JSON.")

    class Meta:
        model = ShareLink
        fields = [
            "id",
            "key",
            "url",
            "export_url",
            "state",
            "created",
            "created_by",
            "expires_at",
            "revoked_at",
        ]
        read_only_fields = ["id", "key", "created", "revoked_at"]

    def _absolute(self, path: str) -> str:
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path

    @extend_schema_field(OpenApiTypes.URI)
    def get_url(self, obj) -> str:
        return self._absolute(reverse("experiments:share", args=[obj.key]))

    @extend_schema_field(OpenApiTypes.URI)
    def get_export_url(self, obj) -> str:
        return self._absolute(reverse("experiments:share_export", args=[obj.key, "json"]))

    def validate_expires_at(self, value):
        if value is None:
            return value
        if value <= timezone.now():
            raise serializers.ValidationError("must be in the future")
        if value > report_ops.latest_expiry():
            raise serializers.ValidationError(f"at most {report_ops.MAX_EXPIRY_DAYS} days ahead")
        return value


# --- Workers -------------------------------------------------------------------------------


class WorkerSerializer(serializers.ModelSerializer):
    online = serializers.BooleanField(read_only=True)

    class Meta:
        model = Worker
        fields = ["name", "hostname", "queues", "pid", "started_at", "last_seen", "online"]
        read_only_fields = fields
