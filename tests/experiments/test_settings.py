"""Configuration from the environment: malformed values stop start-up naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from beeweb.settings import database_from_url

ROOT = Path(__file__).resolve().parents[2]


def test_postgres_url_is_split():
    db = database_from_url("DATABASE_URL", "postgres://u:p%40ss@db.example:6543/beeweb")
    assert (db["ENGINE"], db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "django.db.backends.postgresql",
        "beeweb",
        "u",
        "p@ss",
        "db.example",
        "6543",
    )


@pytest.mark.parametrize("url", ["mysql://x/y", "postgres://host", "sqlite://", "nonsense"])
def test_bad_database_url_names_the_variable(url):
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        database_from_url("DATABASE_URL", url)


@pytest.mark.parametrize(
    "name,value",
    [
        ("DATABASE_URL", "mysql://localhost/beeweb"),
        ("CELERY_BROKER_URL", "kafka://localhost"),
        ("DEBUG", "perhaps"),
        ("EMAIL_PORT", "smtp"),
        ("EMAIL_USE_TLS", "maybe"),
        ("BEEWEB_ALERT_MAX_ATTEMPTS", "0"),
        ("BEEWEB_SCHEDULE_CHECK_SECONDS", "0"),
        ("BEEWEB_BASE_URL", "beeweb.example.org"),
        ("BEEWEB_WEBHOOK_ALLOW_PRIVATE", "sometimes"),
        ("BEEWEB_CHANGES_ALPHA", "often"),
        ("BEEWEB_CHANGES_ALPHA", "1.5"),
        ("BEEWEB_CHANGES_MIN_SIZE", "1"),
        ("BEEWEB_CHANGES_PERMUTATIONS", "ten"),
    ],
)
def test_start_up_stops_with_the_variable_named(tmp_path, name, value):
    env = {**os.environ, "BEEWEB_DATA_DIR": str(tmp_path), name: value}
    proc = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert name in proc.stderr
