"""App configuration for tool adapters and parsers (management commands live here)."""

from django.apps import AppConfig


class RunnersConfig(AppConfig):
    name = "runners"

    def ready(self) -> None:
        # Register the Celery tasks in every process (web, worker, commands, tests): dispatch
        # finds runners.execute_run by name in the app's registry.
        from runners import tasks  # noqa: F401
