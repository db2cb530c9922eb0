"""App configuration for the experiments domain."""

from django.apps import AppConfig


class ExperimentsConfig(AppConfig):
    name = "experiments"
    verbose_name = "Experiments"

    def ready(self) -> None:
        from experiments import summaries

        summaries.connect()
