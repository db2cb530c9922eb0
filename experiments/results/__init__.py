"""Run storage: raw output then metrics (store), bulk ingest, import, configuration summaries and
telemetry."""
