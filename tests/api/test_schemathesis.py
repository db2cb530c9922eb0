"""Property-based run of the whole API from its OpenAPI schema (schemathesis, through the
WSGI app, token-authenticated): whatever it sends, the server answers without a 5xx.

The schema is the one /api/schema/ serves, generated in-process at collection time
(schemathesis's lazy fixture loader does not work with pytest 9), and every call goes
through beeweb's WSGI application with a real token."""

from __future__ import annotations

import json

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
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
    case.validate_response(response, checks=(not_a_server_error,))
