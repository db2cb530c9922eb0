"""URLs of the experiments app: one vocabulary per model (<model>_list, <model>, _edit, _delete)."""

from django.urls import path

from experiments.views import (
    alerts,
    changes,
    compare,
    importing,
    inventory,
    matrices,
    reports,
    runs,
    topology,
    tuning,
)

app_name = "experiments"

urlpatterns = [
    path("", runs.dashboard, name="dashboard"),
    path("runs/", runs.run_list, name="run_list"),
    path("runs/import/", importing.run_import, name="run_import"),
    path("runs/table/", runs.run_table, name="run_table"),
    path("runs/table/runs.<str:fmt>", runs.run_table_export, name="run_table_export"),
    path("runs/<uuid:uuid>/", runs.run_detail, name="run"),
    path("runs/<uuid:uuid>/live/", matrices.run_live, name="run_live"),
    path("runs/<uuid:uuid>/cancel/", matrices.run_cancel, name="run_cancel"),
    path("matrices/", matrices.matrix_list, name="matrix_list"),
    path("matrices/new/", matrices.matrix_edit, name="matrix_new"),
    path("matrices/import/", matrices.matrix_import, name="matrix_import"),
    path("matrices/<uuid:uuid>/", matrices.matrix_detail, name="matrix"),
    path("matrices/<uuid:uuid>/edit/", matrices.matrix_edit, name="matrix_edit"),
    path("matrices/<uuid:uuid>/delete/", matrices.matrix_delete, name="matrix_delete"),
    path("matrices/<uuid:uuid>/export.yaml", matrices.matrix_export, name="matrix_export"),
    path("matrices/<uuid:uuid>/progress/", matrices.matrix_progress, name="matrix_progress"),
    path("matrices/<uuid:uuid>/launch/", matrices.matrix_launch, name="matrix_launch"),
    path("matrices/<uuid:uuid>/rerun/", matrices.matrix_rerun, name="matrix_rerun"),
    path("matrices/<uuid:uuid>/resume/", matrices.matrix_resume, name="matrix_resume"),
    path("matrices/<uuid:uuid>/cancel/", matrices.matrix_cancel, name="matrix_cancel"),
    path("matrices/<uuid:uuid>/schedule/", alerts.matrix_schedule, name="matrix_schedule"),
    path("alerts/", alerts.alert_list, name="alert_list"),
    path("alerts/subscriptions/", alerts.subscription_list, name="subscription_list"),
    path(
        "alerts/subscriptions/<uuid:uuid>/delete/",
        alerts.subscription_delete,
        name="subscription_delete",
    ),
    path("changes/", changes.change_list, name="change_list"),
    path("changes/<uuid:uuid>/", changes.change_detail, name="change"),
    path("changes/<uuid:uuid>/state/", changes.change_state, name="change_state"),
    path("history/<str:key>/", changes.config_history, name="config_history"),
    path("testbeds/<uuid:uuid>/history/", changes.testbed_history, name="testbed_history"),
    path("compare/", compare.compare, name="compare"),
    path("compare/print/", compare.compare_print, name="compare_print"),
    path("compare/matrices/", compare.matrix_options, name="compare_matrix_options"),
    path("compare/export.<str:fmt>", compare.compare_export, name="compare_export"),
    path("reports/", reports.report_list, name="report_list"),
    path("reports/new/", reports.report_new, name="report_new"),
    path("reports/<uuid:uuid>/", reports.report_detail, name="report"),
    path("reports/<uuid:uuid>/print/", reports.report_print, name="report_print"),
    path("reports/<uuid:uuid>/edit/", reports.report_edit, name="report_edit"),
    path("reports/<uuid:uuid>/delete/", reports.report_delete, name="report_delete"),
    path("reports/<uuid:uuid>/share/", reports.share_create, name="share_create"),
    path("reports/<uuid:uuid>/share/<str:key>/revoke/", reports.share_revoke, name="share_revoke"),
    # Share links: public (no login), read-only, frozen unless a signed-in user asks for live.
    path("s/<str:key>/", reports.share, name="share"),
    path("s/<str:key>/print/", reports.share_print, name="share_print"),
    path("s/<str:key>/export.<str:fmt>", reports.share_export, name="share_export"),
    path("tuning/", tuning.tuningset_list, name="tuningset_list"),
    path("tuning/new/", tuning.tuningset_edit, name="tuningset_new"),
    path("tuning/diff/", tuning.tuningset_diff, name="tuningset_diff"),
    path("tuning/<uuid:uuid>/", tuning.tuningset_detail, name="tuningset"),
    path("tuning/<uuid:uuid>/edit/", tuning.tuningset_edit, name="tuningset_edit"),
    path("tuning/<uuid:uuid>/delete/", tuning.tuningset_delete, name="tuningset_delete"),
    path("tuning/<uuid:uuid>/import/", tuning.tuningset_import, name="tuningset_import"),
    path(
        "tuning/<uuid:uuid>/export/<str:scope>.conf",
        tuning.tuningset_export,
        name="tuningset_export",
    ),
    # Inventory: hardware profiles, nodes and testbeds share one set of views.
    *[
        pattern
        for kind, prefix in inventory.PREFIXES.items()
        for pattern in (
            path(f"{prefix}/", inventory.object_list, {"kind": kind}, name=f"{kind}_list"),
            path(f"{prefix}/new/", inventory.object_edit, {"kind": kind}, name=f"{kind}_new"),
            path(f"{prefix}/<uuid:uuid>/", inventory.object_detail, {"kind": kind}, name=kind),
            path(
                f"{prefix}/<uuid:uuid>/edit/",
                inventory.object_edit,
                {"kind": kind},
                name=f"{kind}_edit",
            ),
            path(
                f"{prefix}/<uuid:uuid>/delete/",
                inventory.object_delete,
                {"kind": kind},
                name=f"{kind}_delete",
            ),
        )
    ],
    path(
        "testbeds/<uuid:uuid>/operators/",
        inventory.testbed_operators,
        name="testbed_operators",
    ),
    path(
        "testbeds/<uuid:uuid>/topology/",
        topology.testbed_topology_import,
        name="testbed_topology_import",
    ),
    path(
        "testbeds/<uuid:uuid>/topology/live/",
        topology.testbed_topology_live,
        name="testbed_topology_live",
    ),
    # Parts edited on their parent's page: drives and NICs of a profile; roles, targets and
    # pools of a testbed.
    path("<str:prefix>/<uuid:uuid>/<str:part>/new/", inventory.part_edit, name="part_new"),
    path(
        "<str:prefix>/<uuid:uuid>/<str:part>/<uuid:part_uuid>/edit/",
        inventory.part_edit,
        name="part_edit",
    ),
    path(
        "<str:prefix>/<uuid:uuid>/<str:part>/<uuid:part_uuid>/delete/",
        inventory.part_delete,
        name="part_delete",
    ),
]
