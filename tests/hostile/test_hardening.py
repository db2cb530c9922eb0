"""Finding 7 and 11 of issue 11, reproduced by a hostile colleague and shown fixed: login and
API throttling, Content-Security-Policy, no-store on secrets, CSV cells that a spreadsheet
would run, an open redirect through ``next``, ``ensure_admin`` resetting the admin password,
world-readable files under the data directory, and ``check --deploy`` with the README's
production settings."""

from __future__ import annotations

import csv
import io
import os
import re
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from experiments.comparison.reports import create_share_link
from experiments.models import Report, Run, TuningSet
from experiments.views.compare import csv_cell
from tests.helpers.comparison import add_run, make_testbed

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"
pytestmark = pytest.mark.django_db


def login(client: Client, username: str, password: str):
    return client.post(reverse("login"), {"username": username, "password": password})


# --- Finding 7: login throttling -----------------------------------------------------------


def test_six_wrong_passwords_lock_the_right_one_out(alice, bob):
    attacker = Client()
    codes = [login(attacker, "alice", f"guess-{i}").status_code for i in range(6)]
    assert codes[:4] == [200] * 4  # the form again, with its error
    assert codes[5] == 429 and set(codes) <= {200, 429}
    locked = login(attacker, "alice", "alice-pw")
    assert locked.status_code == 429
    html = locked.content.decode()
    assert "Too many failed logins" in html and "15 minutes" in html
    assert int(locked["Retry-After"]) == 15 * 60
    assert "_auth_user_id" not in attacker.session
    assert attacker.get(reverse("experiments:dashboard")).status_code == 302  # still anonymous
    # The lock is per username and address: bob logs in from the same address.
    assert login(Client(), "bob", "bob-pw").status_code == 302


def test_the_lock_ends_after_the_cool_off(alice):
    from axes.models import AccessAttempt
    from django.utils import timezone

    client = Client()
    for i in range(5):
        login(client, "alice", f"guess-{i}")
    assert login(client, "alice", "alice-pw").status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - timezone.timedelta(minutes=16))
    response = login(client, "alice", "alice-pw")
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(alice.pk)


def test_the_admin_login_is_throttled_too(alice):
    client = Client()
    url = reverse("admin:login")
    codes = [
        client.post(url, {"username": "alice", "password": f"x{i}"}).status_code for i in range(6)
    ]
    assert codes[-1] == 429 and 500 not in codes


# --- Finding 7: API throttling ---------------------------------------------------------------


def test_api_token_brute_force_answers_429(alice):
    right = Token.objects.create(user=alice).key
    attacker = APIClient(REMOTE_ADDR="203.0.113.7")
    codes = [
        attacker.get("/api/runs/", HTTP_AUTHORIZATION=f"Token {secrets.token_hex(20)}").status_code
        for _ in range(11)
    ]
    assert codes[:10] == [401] * 10 and codes[10] == 429
    throttled = attacker.get("/api/runs/", HTTP_AUTHORIZATION=f"Token {right}")
    assert throttled.status_code == 429  # no oracle while throttled
    assert "wrong API token" in throttled.json()["detail"] and "Retry-After" in throttled
    # Another address with the right token is not affected.
    other = APIClient(REMOTE_ADDR="198.51.100.1")
    assert other.get("/api/runs/", HTTP_AUTHORIZATION=f"Token {right}").status_code == 200


def test_a_spoofed_forwarded_for_does_not_escape_the_throttle(alice):
    attacker = APIClient(REMOTE_ADDR="203.0.113.8")
    codes = [
        attacker.get(
            "/api/runs/",
            HTTP_AUTHORIZATION=f"Token {secrets.token_hex(20)}",
            HTTP_X_FORWARDED_FOR=f"10.0.0.{i}",
        ).status_code
        for i in range(11)
    ]
    assert codes[-1] == 429


def test_signed_in_api_users_are_rate_limited(alice, monkeypatch):
    monkeypatch.setattr(
        SimpleRateThrottle, "THROTTLE_RATES", {**SimpleRateThrottle.THROTTLE_RATES, "user": "3/m"}
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=alice).key}")
    codes = [client.get("/api/runs/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]


def test_default_api_rates_are_generous():
    rates = SimpleRateThrottle.THROTTLE_RATES
    assert rates["user"] == "3000/minute" and rates["token_failure"] == "10/minute"


# --- Finding 11: Content-Security-Policy -------------------------------------------------------


def _csp(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in header.split(";") if part.strip()}


def test_csp_on_pages_and_share_links(alice_client, raid):
    report = Report.objects.create(
        owner=raid[0].owner, title="r", query="metric=write_bw&series=raid"
    )
    link = create_share_link(report, raid[0].owner)
    pages = [
        alice_client.get(reverse("experiments:dashboard")),
        alice_client.get(reverse("experiments:compare") + "?metric=write_bw&series=raid"),
        alice_client.get(reverse("api:docs")),
        Client().get(reverse("login")),
        Client().get(link.get_absolute_url()),
        Client().get(reverse("experiments:share_print", args=[link.key])),
    ]
    for response in pages:
        assert response.status_code == 200
        policy = _csp(response)
        assert policy["default-src"] == ["'self'"]
        assert policy["script-src"] == ["'self'"]  # no inline script, no CDN, no eval
        assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
        assert not any("http" in v for values in policy.values() for v in values)


def test_templates_carry_no_inline_script_or_handler():
    inline_script = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", re.I)
    handler = re.compile(r"\son[a-z]+\s*=", re.I)
    offenders = []
    for path in TEMPLATES.rglob("*.html"):
        text = path.read_text()
        if inline_script.search(text) or handler.search(text):
            offenders.append(str(path.relative_to(TEMPLATES)))
    assert offenders == []


# --- Finding 11: secrets are not cached ----------------------------------------------------


def test_token_page_and_share_keys_are_no_store(alice_client, alice):
    for method in ("get", "post"):
        response = getattr(alice_client, method)(reverse("api:token"))
        assert "no-store" in response["Cache-Control"]
    report = Report.objects.create(owner=alice, title="r", query="metric=write_bw")
    create_share_link(report, alice)
    page = alice_client.get(report.get_absolute_url())
    assert page.status_code == 200 and "no-store" in page["Cache-Control"]
    api = alice_client.get(f"/api/reports/{report.uuid}/share-links/")
    assert api.status_code == 200 and "no-store" in api["Cache-Control"]


# --- Finding 11: CSV cells ------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,expected",
    [
        ('=HYPERLINK("https://evil.example","x")', '\'=HYPERLINK("https://evil.example","x")'),
        ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("\tleading tab", "'\tleading tab"),
        ("\rleading cr", "'\rleading cr"),
        ("RAID0", "RAID0"),
        ("-1", "-1"),
        ("-1.5e3", "-1.5e3"),
        ("+4", "+4"),
        (-1, -1),
        (-2.5, -2.5),
        (None, ""),
    ],
)
def test_csv_cell(value, expected):
    assert csv_cell(value) == expected


def test_share_link_csv_escapes_formulas(alice):
    tb = make_testbed(alice, "tb", "x86_64", "0")
    evil = TuningSet.objects.create(owner=alice, name='=HYPERLINK("https://evil.example","x")')
    plain = TuningSet.objects.create(owner=alice, name="base")
    for value in (1e9, 1.1e9):
        add_run(tb, value, tuning=evil, offset=-1)
        add_run(tb, -value, tuning=plain, offset=-1)
    report = Report.objects.create(
        owner=alice, title="r", query="metric=write_bw&x=param:offset&series=tuning"
    )
    link = create_share_link(report, alice)
    response = Client().get(reverse("experiments:share_export", args=[link.key, "csv"]))
    assert response.status_code == 200
    rows = {r["series"]: r for r in csv.DictReader(io.StringIO(response.content.decode()))}
    assert set(rows) == {'\'=HYPERLINK("https://evil.example","x")', "base"}
    assert rows["base"]["x"] == "-1" and float(rows["base"]["mean"]) < 0  # numbers untouched


# --- Finding 11: next ----------------------------------------------------------------------


def test_cancel_ignores_an_external_next(alice_client, alice):
    run = Run.objects.create(
        owner=alice, testbed=make_testbed(alice, "tb", "x86_64", "0"), tool="fio"
    )
    url = reverse("experiments:run_cancel", args=[run.uuid])
    for evil in ("https://evil.example/", "//evil.example/", "https:evil.example", "\\\\evil"):
        response = alice_client.post(url, {"next": evil})
        assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    response = alice_client.post(url, {"next": reverse("experiments:run_list")})
    assert response["Location"] == reverse("experiments:run_list")


# --- Finding 11: ensure_admin ----------------------------------------------------------------


def test_ensure_admin_never_resets_a_password(monkeypatch):
    monkeypatch.setenv("BEEWEB_ADMIN_USER", "root-admin")
    monkeypatch.setenv("BEEWEB_ADMIN_PASSWORD", "first-password")
    out = io.StringIO()
    call_command("ensure_admin", stdout=out)
    assert "created" in out.getvalue()
    admin = get_user_model().objects.get(username="root-admin")
    assert admin.is_superuser and admin.check_password("first-password")
    admin.set_password("changed-by-the-admin")
    admin.save()
    out = io.StringIO()
    call_command("ensure_admin", stdout=out)
    assert "left unchanged" in out.getvalue()
    admin.refresh_from_db()
    assert admin.check_password("changed-by-the-admin")


# --- Finding 11: files under the data directory -------------------------------------------------


def _embedded_env(data_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        # DJANGO_ALLOW_ASYNC_UNSAFE: the browser tests set it in this process (Playwright's
        # loop), and check --deploy rightly refuses it.
        if k
        not in {
            "DATABASE_URL",
            "CELERY_BROKER_URL",
            "DJANGO_SETTINGS_MODULE",
            "BEEWEB_ENV",
            "DJANGO_ALLOW_ASYNC_UNSAFE",
        }
        and not k.startswith("SECURE_")
    }
    env["BEEWEB_DATA_DIR"] = str(data_dir)
    return env


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _manage(env, *args) -> str:
    proc = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


def test_embedded_data_dir_is_private(tmp_path):
    data = tmp_path / "data"
    _manage(_embedded_env(data), "migrate", "--noinput", "-v0")
    assert _mode(data) == 0o700
    assert _mode(data / "beeweb.sqlite3") == 0o600
    assert _mode(data / "secret_key") == 0o600
    for sub in ("broker", "broker/queue", "broker/processed", "broker/control"):
        assert _mode(data / sub) == 0o700, sub
    for sidecar in data.glob("beeweb.sqlite3-*"):
        assert _mode(sidecar) == 0o600, sidecar


def test_an_existing_world_readable_database_is_tightened(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "beeweb.sqlite3").touch()
    (data / "beeweb.sqlite3").chmod(0o644)
    _manage(_embedded_env(data), "check")
    assert _mode(data / "beeweb.sqlite3") == 0o600


# --- Finding 11: check --deploy ---------------------------------------------------------------

# The production settings of the README (section Configuration, "In production").
PRODUCTION = {
    "DATABASE_URL": "postgres://beeweb:secret@db.example.org:5432/beeweb",
    "CELERY_BROKER_URL": "redis://:secret@redis.example.org:6379/0",
    "ALLOWED_HOSTS": "beeweb.example.org",
    "CSRF_TRUSTED_ORIGINS": "https://beeweb.example.org",
    "DEBUG": "false",
    "BEEWEB_BEHIND_PROXY": "true",
    "SECURE_SSL_REDIRECT": "true",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
}


def _settings_of(env, *names) -> list[str]:
    code = "from django.conf import settings; " + "; ".join(
        f"print(repr(settings.{n}))" for n in names
    )
    return _manage(env, "shell", "--no-imports", "-c", code).split()


def test_check_deploy_is_clean_with_the_readme_production_settings(tmp_path):
    readme = (ROOT / "README.md").read_text()
    for name, value in PRODUCTION.items():
        assert f"{name}={value}" in readme, name
    env = {**_embedded_env(tmp_path), **PRODUCTION, "SECRET_KEY": secrets.token_urlsafe(50)}
    out = _manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert "System check identified no issues" in out
    assert _settings_of(env, "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE") == ["True", "True"]


@pytest.mark.parametrize(
    "name,value",
    [
        ("BEEWEB_ENV", "staging"),
        ("BEEWEB_API_USER_RATE", "lots"),
        ("BEEWEB_LOGIN_COOLOFF_MINUTES", "0"),
        ("CACHE_URL", "memcached://cache:11211"),
        ("SECURE_HSTS_SECONDS", "a year"),
    ],
)
def test_a_malformed_security_setting_stops_start_up(tmp_path, name, value):
    env = {**_embedded_env(tmp_path), name: value}
    proc = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and name in proc.stderr


def test_the_embedded_default_keeps_plain_http_cookies(tmp_path):
    env = _embedded_env(tmp_path)
    assert _settings_of(env, "SESSION_COOKIE_SECURE", "SECURE_SSL_REDIRECT") == ["False", "False"]
    env["BEEWEB_ENV"] = "production"
    assert _settings_of(env, "SESSION_COOKIE_SECURE") == ["True"]
