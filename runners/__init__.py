"""The Django-free kit: the tool registry and metric vocabulary, output parsers
(``runners.parsers``), tool adapters (``runners.tools``), launch specs, Slurm argv, node
configuration, the telemetry sampler and the push client. It imports nothing of beeweb's
apps, Django or Celery (checked by ``lint-imports``)."""
