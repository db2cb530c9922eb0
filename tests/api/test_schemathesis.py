"""Property-based run of the whole API from its OpenAPI schema (schemathesis, through the
WSGI app, token-authenticated): whatever it sends, the server answers without a 5xx.

The schema is the one /api/schema/ serves, generated in-process at collection time
(schemathesis's lazy fixture loader does not work with pytest 9), and every call goes
through beeweb's WSGI application with a real token.

Both generation modes run: positive data (what the schema allows) and negative data (what it
does not: wrong types, out-of-range numbers, missing fields, NUL characters), through the
examples, coverage and fuzzing phases. Issue 11 finding 9: negative data must answer 4xx,
never 5xx. With ``-s`` the test prints how many requests were sent and how many answered 4xx
(per mode)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from beeweb.wsgi import application

# Small on purpose: ~60 operations x a few examples keeps this around a minute.
MAX_EXAMPLES = 6

schema = schemathesis.openapi.from_dict(
    json.loads(
        OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True))
    )
)
schema.app = application
schema.config.generation.update(modes=list(GenerationMode), allow_x00=True)
# The coverage phase (every parameter's boundaries, one at a time) sends negative data only:
# positive data comes from the examples and fuzzing phases, and this halves the runtime.
schema.config.phases.coverage.generation.update(modes=[GenerationMode.NEGATIVE])

# (phase, mode, status class) -> requests, over the whole module; printed at its end.
SENT: Counter[tuple[str, str, str]] = Counter()


@pytest.fixture(scope="module", autouse=True)
def report_counts():
    yield
    total = sum(SENT.values())
    refused = sum(n for (*_, status), n in SENT.items() if status == "4xx")
    detail = ", ".join(f"{' '.join(key)}: {n}" for key, n in sorted(SENT.items()))
    print(f"\nschemathesis: {total} requests, {refused} answered 4xx ({detail})")


@pytest.fixture
def api_token(db, django_user_model, testbed, tuning_set):
    user = django_user_model.objects.create_user("fuzz", password="fuzz-pw")
    return Token.objects.create(user=user).key


@pytest.fixture(autouse=True)
def keep_test_connection():
    """The WSGI handler closes the database connection after each request when
    CONN_MAX_AGE is 0 (CI), which would end the test's transaction: do what Django's test
    client does and keep it open while the test runs."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_server_errors(case, api_token):
    response = case.call(headers={"Authorization": f"Token {api_token}"})
    meta = case.meta
    SENT[meta.phase.name.value, meta.generation.mode.value, f"{response.status_code // 100}xx"] += 1
    case.validate_response(response, checks=(not_a_server_error,))
