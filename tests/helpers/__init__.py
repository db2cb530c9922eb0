"""Plain functions and data the unit tests share, imported by name: no fixtures here (those are
in the conftest.py files) and no tests (a test module imports from no other test module or
conftest.py; tests/test_suite_imports.py checks it). The end-to-end labs, with real processes,
are in tests/labs.

- ``samples.py``: the real tool outputs in ../shared/samples (``SAMPLES``, ``read_sample``,
  ``sample``), a fio console captured here, and ``metric`` to pick one parsed metric.
- ``comparison.py``: testbeds with known hardware and runs with known values for the
  comparison, report and API tests; the specs a summaries comparison must reproduce.
- ``sweeps.py``: finished fio matrices (runs table, parallel coordinates, latency charts).
- ``telemetry.py``: synthetic telemetry documents of nodes (beeweb-telemetry/1).
- ``execution.py``: a matrix expanded on a testbed, and a run queued as a dispatch would.
- ``tools.py``: the runners kit's commands run here for real (``run``, ``need``) and two hosts.
- ``api.py``: a DRF client authenticated by a user's token.
- ``receivers.py``: a real SMTP server (aiosmtpd) and a webhook HTTP server on 127.0.0.1
  keeping what they receive, and the webhook signature check (``WebhookReceiver.signed``).
"""
