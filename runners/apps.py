"""App configuration for tool adapters and parsers (management commands live here)."""

from django.apps import AppConfig


class RunnersConfig(AppConfig):
    name = "runners"
