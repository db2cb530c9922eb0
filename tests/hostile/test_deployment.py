"""Finding 11's deployment half: docker/compose.yaml keeps no secret of its own, runs Redis
with persistence and a password, and publishes only the TLS proxy."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "docker" / "compose.yaml"


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_secrets_come_from_the_environment_and_compose_refuses_to_start_without_them():
    text = COMPOSE.read_text()
    for name in ("POSTGRES_PASSWORD", "REDIS_PASSWORD", "SECRET_KEY", "BEEWEB_ADMIN_PASSWORD"):
        assert f"${{{name}:?" in text, name
    env = compose()["x-beeweb"]["environment"]
    # Every URL with credentials takes them from a variable, never a literal.
    for key in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL"):
        assert re.match(r"^\w+://\w*:\$\{[A-Z_]+:\?[^}]*\}@", env[key]), (key, env[key])
    assert compose()["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith("${")


def test_redis_keeps_its_queue_on_disk_and_needs_a_password():
    redis = compose()["services"]["redis"]
    script = " ".join(redis["command"])
    assert "--appendonly yes" in script
    assert "requirepass $$REDIS_PASSWORD" in script
    assert "--save ''" not in script and '--save ""' not in script
    assert any(v.endswith(":/data") for v in redis["volumes"])
    assert "ports" not in redis


def test_only_the_tls_proxy_is_published_and_web_trusts_only_it():
    services = compose()["services"]
    published = {name for name, svc in services.items() if svc.get("ports")}
    assert published == {"proxy"}
    assert sorted(services["proxy"]["ports"]) == ["443:443", "80:80"]
    env = compose()["x-beeweb"]["environment"]
    assert env["BEEWEB_BEHIND_PROXY"] == "true"
    assert env["SECURE_SSL_REDIRECT"] == "true"
    caddyfile = (COMPOSE.parent / "Caddyfile").read_text()
    assert "reverse_proxy" in caddyfile and "web:8000" in caddyfile


def test_ensure_admin_in_compose_runs_on_every_start_without_resetting():
    """web runs ensure_admin at each start: it must only create the admin (tested in
    test_hardening), so the password given once is never reset."""
    assert "ensure_admin" in compose()["services"]["web"]["command"]
