"""Django admin for every model; published rows are read-only there too."""

from __future__ import annotations

from django.contrib import admin

from experiments import models as m


class PublishedReadOnly:
    """Published study data is changed only by ``load_published``."""

    def has_change_permission(self, request, obj=None):
        if obj is not None and getattr(obj, "published", False):
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        if obj is not None and getattr(obj, "published", False):
            return False
        return super().has_delete_permission(request, obj)


class DriveInline(admin.TabularInline):
    model = m.Drive
    extra = 0


class NicInline(admin.TabularInline):
    model = m.Nic
    extra = 0


@admin.register(m.HardwareProfile)
class HardwareProfileAdmin(PublishedReadOnly, admin.ModelAdmin):
    list_display = ["name", "vendor", "architecture", "cpu_model", "published", "source"]
    list_filter = ["architecture", "published"]
    search_fields = ["name", "vendor", "model", "cpu_model"]
    inlines = [DriveInline, NicInline]


@admin.register(m.Drive)
class DriveAdmin(admin.ModelAdmin):
    list_display = ["profile", "kind", "model", "count", "capacity_gb", "purpose"]
    list_filter = ["kind", "purpose"]


@admin.register(m.Nic)
class NicAdmin(admin.ModelAdmin):
    list_display = ["profile", "kind", "model", "rate_gbps", "ports", "count"]


@admin.register(m.Node)
class NodeAdmin(PublishedReadOnly, admin.ModelAdmin):
    list_display = ["hostname", "profile", "address", "os", "published"]
    search_fields = ["hostname", "address"]
    list_filter = ["published"]


class TestbedNodeInline(admin.TabularInline):
    model = m.TestbedNode
    extra = 0


class TargetInline(admin.TabularInline):
    model = m.Target
    extra = 0


class StoragePoolInline(admin.TabularInline):
    model = m.StoragePool
    extra = 0


@admin.register(m.Testbed)
class TestbedAdmin(PublishedReadOnly, admin.ModelAdmin):
    list_display = ["name", "beegfs_version", "fabric", "published", "source"]
    list_filter = ["published", "fabric"]
    search_fields = ["name", "description"]
    inlines = [TestbedNodeInline, TargetInline, StoragePoolInline]


@admin.register(m.TestbedNode)
class TestbedNodeAdmin(admin.ModelAdmin):
    list_display = ["testbed", "node", "management", "metadata", "storage", "client"]


@admin.register(m.Target)
class TargetAdmin(admin.ModelAdmin):
    list_display = ["testbed", "kind", "node", "name", "raid_level", "disks", "filesystem"]
    list_filter = ["kind", "raid_level", "filesystem"]


@admin.register(m.StoragePool)
class StoragePoolAdmin(admin.ModelAdmin):
    list_display = ["testbed", "pool_id", "name"]


class TuningParameterInline(admin.TabularInline):
    model = m.TuningParameter
    extra = 0
    readonly_fields = ["normalized", "known"]


@admin.register(m.TuningSet)
class TuningSetAdmin(PublishedReadOnly, admin.ModelAdmin):
    list_display = ["name", "parent", "revision", "published", "source"]
    list_filter = ["published"]
    search_fields = ["name"]
    inlines = [TuningParameterInline]


@admin.register(m.TuningParameter)
class TuningParameterAdmin(admin.ModelAdmin):
    list_display = ["tuning_set", "scope", "key", "value", "known"]
    list_filter = ["scope", "known"]
    search_fields = ["key"]


@admin.register(m.TuningRevision)
class TuningRevisionAdmin(admin.ModelAdmin):
    list_display = ["tuning_set", "number", "author", "created"]


class MetricInline(admin.TabularInline):
    model = m.Metric
    extra = 0


@admin.register(m.Run)
class RunAdmin(PublishedReadOnly, admin.ModelAdmin):
    list_display = ["__str__", "tool", "testbed", "tuning_set", "status", "created", "published"]
    list_filter = ["tool", "status", "published"]
    search_fields = ["label", "command"]
    raw_id_fields = ["testbed", "tuning_set", "target"]
    inlines = [MetricInline]


@admin.register(m.Metric)
class MetricAdmin(admin.ModelAdmin):
    list_display = ["run", "name", "stat", "iteration", "value", "unit", "primary"]
    list_filter = ["name", "stat", "primary"]
    raw_id_fields = ["run"]


@admin.register(m.Worker)
class WorkerAdmin(admin.ModelAdmin):
    list_display = ["name", "hostname", "queues", "pid", "started_at", "last_seen", "agent_seen"]
    readonly_fields = ["name", "hostname", "queues", "pid", "started_at", "last_seen", "agent_seen"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written only by beeweb itself (node agents, the janitor): listed and viewed,
    never added, changed or deleted here."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(m.NodeRequest)
class NodeRequestAdmin(ReadOnlyAdmin):
    """A question to a node's agent (experiments.execution.noderequests) and its answer."""

    list_display = [
        "created_at",
        "hostname",
        "kind",
        "requested_by",
        "taken_by",
        "taken_at",
        "answered_at",
        "error",
    ]
    list_filter = ["kind"]
    search_fields = ["hostname", "taken_by", "error"]
    date_hierarchy = "created_at"
    ordering = ["-created_at", "-id"]
    list_select_related = ["requested_by"]


@admin.register(m.BeegfsConfigChange)
class BeegfsConfigChangeAdmin(ReadOnlyAdmin):
    """A BeeGFS server config file a node's agent changed for a matrix, and its restore
    (experiments.execution.beegfs)."""

    list_display = [
        "applied_at",
        "hostname",
        "service",
        "tuning_set",
        "matrix",
        "run",
        "restart_s",
        "online_s",
        "restored_at",
        "restore_outcome",
    ]
    list_filter = ["service"]
    search_fields = ["hostname", "conf", "tuning_set"]
    date_hierarchy = "applied_at"
    ordering = ["-applied_at", "-id"]
    list_select_related = ["matrix", "run__testbed"]
