"""The REST API (Django REST framework): every object by UUID, bulk ingest, comparison."""
