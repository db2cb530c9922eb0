"""URLs of the experiments app: one vocabulary per model (<model>_list, <model>, _edit, _delete)."""

from django.urls import path

from experiments.views import compare, importing, inventory, runs, tuning

app_name = "experiments"

urlpatterns = [
    path("", runs.dashboard, name="dashboard"),
    path("runs/", runs.run_list, name="run_list"),
    path("runs/import/", importing.run_import, name="run_import"),
    path("runs/<uuid:uuid>/", runs.run_detail, name="run"),
    path("compare/", compare.compare, name="compare"),
    path("tuning/", tuning.tuningset_list, name="tuningset_list"),
    path("tuning/new/", tuning.tuningset_edit, name="tuningset_new"),
    path("tuning/diff/", tuning.tuningset_diff, name="tuningset_diff"),
    path("tuning/<uuid:uuid>/", tuning.tuningset_detail, name="tuningset"),
    path("tuning/<uuid:uuid>/edit/", tuning.tuningset_edit, name="tuningset_edit"),
    path("tuning/<uuid:uuid>/delete/", tuning.tuningset_delete, name="tuningset_delete"),
    path("tuning/<uuid:uuid>/import/", tuning.tuningset_import, name="tuningset_import"),
    path("tuning/<uuid:uuid>/export/<str:scope>.conf", tuning.tuningset_export,
         name="tuningset_export"),
    # Inventory: hardware profiles, nodes and testbeds share one set of views.
    *[
        pattern
        for kind, prefix in inventory.PREFIXES.items()
        for pattern in (
            path(f"{prefix}/", inventory.object_list, {"kind": kind}, name=f"{kind}_list"),
            path(f"{prefix}/new/", inventory.object_edit, {"kind": kind}, name=f"{kind}_new"),
            path(f"{prefix}/<uuid:uuid>/", inventory.object_detail, {"kind": kind}, name=kind),
            path(f"{prefix}/<uuid:uuid>/edit/", inventory.object_edit, {"kind": kind},
                 name=f"{kind}_edit"),
            path(f"{prefix}/<uuid:uuid>/delete/", inventory.object_delete, {"kind": kind},
                 name=f"{kind}_delete"),
        )
    ],
    # Parts edited on their parent's page: drives and NICs of a profile; roles, targets and
    # pools of a testbed.
    path("<str:prefix>/<uuid:uuid>/<str:part>/new/", inventory.part_edit, name="part_new"),
    path("<str:prefix>/<uuid:uuid>/<str:part>/<uuid:part_uuid>/edit/", inventory.part_edit,
         name="part_edit"),
    path("<str:prefix>/<uuid:uuid>/<str:part>/<uuid:part_uuid>/delete/", inventory.part_delete,
         name="part_delete"),
]
