"""The OpenAPI schema: it builds without a warning, validates, and documents the body of every
success answer under /api/v1/ (STYLE, "Side by side" habit 6)."""
import re

import pytest
from django.core.management import call_command
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator

from tests.factories import PMFactory

METHODS = ("get", "post", "put", "patch", "delete")

def _operations() -> list[tuple[str, str, dict]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return [(method, path, operation) for path, item in schema["paths"].items() if path.startswith("/api/v1/")
            for method, operation in item.items() if method in METHODS]


def test_the_schema_builds_without_warnings_and_validates(tmp_path):
    GENERATOR_STATS.reset()

    # --fail-on-warn raises on any warning or error of the generator, --validate on an invalid schema.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))

    assert (tmp_path / "schema.yml").read_text().startswith("openapi: 3")


def test_the_api_has_operations_to_check():
    assert len(_operations()) > 25


@pytest.mark.parametrize("operation", [pytest.param(operation, id=f"{method.upper()} {path}")
                                       for method, path, operation in _operations()])
def test_every_success_answer_has_a_documented_body(operation):
    success = {code: answer for code, answer in operation["responses"].items() if str(code).startswith("2")}

    # 204 is the one success without a body; a streamed file still names its media types.
    with_body = {code: answer for code, answer in success.items() if str(code) != "204"}
    undocumented = [code for code, answer in with_body.items()
                    if not answer.get("content") or not all(m.get("schema") for m in answer["content"].values())]

    assert success, "no 2xx answer at all"
    assert undocumented == []


@pytest.mark.django_db
def test_the_api_docs_page_loads_only_our_own_static_files_and_no_inline_script(client):
    client.force_login(PMFactory())

    page = client.get("/api/docs/").content.decode()

    sources = re.findall(r'<script src="([^"]+)"', page) + re.findall(r'<link rel="stylesheet" href="([^"]+)"', page)
    assert sources and all(s.startswith("/static/") for s in sources)
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in sources
    assert "<script>" not in page and "<style" not in page


@pytest.mark.parametrize("operation", [pytest.param(operation, id=f"{method.upper()} {path}")
                                       for method, path, operation in _operations()])
def test_every_operation_documents_the_frameworks_error_answers_with_the_error_body(operation):
    errors = {str(code): answer for code, answer in operation["responses"].items() if str(code)[0] in "45"}

    assert {"400", "401", "403", "404", "409", "429"} <= set(errors)
    assert all(answer["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
               for answer in errors.values())


@pytest.mark.django_db
def test_a_serializer_refusal_and_an_unknown_api_url_answer_the_error_shape(api):
    api.force_authenticate(PMFactory())

    refused = api.post("/api/v1/projects/", {"name": "", "overlap": "many"}, format="json")
    unknown = api.get("/api/v1/judge-runs/not-a-number/")

    assert refused.status_code == 400 and refused.json()["code"] == "invalid"
    assert {(e["field"], e["code"]) for e in refused.json()["errors"]} == {("name", "blank"), ("overlap", "invalid")}
    assert refused.json()["detail"].startswith("The request is invalid: ")
    assert (unknown.status_code, unknown["Content-Type"]) == (404, "application/json")
    assert unknown.json() == {"detail": "Not found, or not yours.", "code": "not_found"}
