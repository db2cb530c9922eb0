"""App configuration for the experiments domain."""

from django.apps import AppConfig


class ExperimentsConfig(AppConfig):
    name = "experiments"
    verbose_name = "Experiments"

    def ready(self) -> None:
        from experiments import adaptive, summaries
        from experiments.models.runs import runs_ended

        summaries.connect()
        runs_ended.connect(adaptive.on_runs_ended, dispatch_uid="experiments.adaptive")
