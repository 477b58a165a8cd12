"""Schemathesis against the OpenAPI schema: no 5xx, and every answer as the schema documents it.

Every operation under /api/v1/ is called in-process (the WSGI app, the test database)
with generated data, valid and invalid, as the project's PM and as one of its experts,
each with a token. A server error, a status the operation does not document, or a body
or content type other than the documented one fails the test. Path ids named
`project_id` point at the fixture's project, so the calls reach the views and not only
the 404 of a missing project. Bounded: FUZZ_EXAMPLES examples per operation and user
(RUBRICA_FUZZ_EXAMPLES raises it for a longer local run).
"""
import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, Phase, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from annotation import permissions
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

FUZZ_EXAMPLES = int(os.environ.get("RUBRICA_FUZZ_EXAMPLES", "5"))
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def _api_schema() -> dict:
    generated = SchemaGenerator().get_schema(request=None, public=True)
    generated["paths"] = {path: item for path, item in generated["paths"].items() if path.startswith("/api/v1/")}
    return generated


schema = schemathesis.openapi.from_dict(_api_schema())
app = get_wsgi_application()


@pytest.fixture
def in_process():
    """The WSGI app in this test's transaction: as Django's test client does, a request's end must
    not close the database connection the test runs in."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def tokens(db, in_process, settings) -> dict[str, str]:
    # Tokens, not passwords, sign these calls in: a fast hasher saves a second of setup per test.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    pm = PMFactory()
    expert = ExpertFactory()
    project = make_project_with_tasks(n_questions=2, items_per_question=2, pm=pm)
    permissions.grant_annotate(expert, project)
    return {"project_id": str(project.pk), "pm": Token.objects.create(user=pm).key,
            "expert": Token.objects.create(user=expert).key}


@pytest.mark.parametrize("role", ["pm", "expert"])
@schema.parametrize()
# Generated examples only: Schemathesis' coverage phase (Hypothesis' explicit phase) adds hundreds
# of boundary cases per operation, and shrinking a failure is left to a local rerun.
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
def test_every_operation_answers_as_documented(case, role, tokens):
    if "project_id" in (case.path_parameters or {}):
        case.path_parameters["project_id"] = tokens["project_id"]

    case.call_and_validate(app=app, headers={"Authorization": f"Token {tokens[role]}"}, checks=CHECKS)
