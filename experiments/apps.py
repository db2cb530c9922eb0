"""App configuration for the experiments domain."""

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ExperimentsConfig(AppConfig):
    name = "experiments"
    verbose_name = "Experiments"

    def ready(self) -> None:
        # Register the Celery tasks in every process (web, worker, commands, tests): dispatch
        # finds runners.execute_run by name in the app's registry.
        from experiments.alerts import tasks as alert_tasks  # noqa: F401
        from experiments.changes import tasks as change_tasks  # noqa: F401
        from experiments.execution import tasks  # noqa: F401
        from experiments.matrices import (
            adaptive,
            schedules,  # noqa: F401
        )
        from experiments.models.runs import data_changed, runs_ended
        from experiments.results import store, summaries

        summaries.connect()
        data_changed.connect(store.on_data_changed, dispatch_uid="experiments.results.store")
        runs_ended.connect(adaptive.on_runs_ended, dispatch_uid="experiments.matrices.adaptive")
        # The triggers that keep runs' typed parameters true (experiments.models.params), again
        # after every migrate: SQLite drops them with a table a migration rebuilds.
        post_migrate.connect(_install_param_triggers, sender=self, dispatch_uid="run-params")


def _install_param_triggers(using="default", **kwargs) -> None:
    from django.db import connections

    from experiments.models import params

    params.install(connections[using])
