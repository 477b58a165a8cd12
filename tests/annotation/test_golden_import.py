"""Golden reference labels: CLI, API and page imports; all or nothing; golden tasks stay out of regular work."""
import json
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.assignment.services import assignment_claim_next
from annotation.calibration.golden_set import GOLDEN_OVERLAP
from annotation.exchange.golden import golden_import
from annotation.models import GoldenReference, ItemConsensus, Task
from annotation.selectors import rubric_items_for_task
from annotation.services import project_create
from annotation.submission.services import labels_submit
from core.errors import DomainError
from tests.factories import PMFactory, make_project_with_tasks
from tests.support.quality import calibrated, golden_file, make_golden_project, member, reference_bits

pytestmark = pytest.mark.django_db


@pytest.fixture
def pm():
    return PMFactory()


@pytest.fixture
def project(pm):
    return make_project_with_tasks(n_questions=3, items_per_question=3, models=2, pm=pm)


def _task(project, question="q0", model="model-0") -> Task:
    return Task.objects.select_related("response__question").get(
        project=project, response__question__external_id=question, response__model_name=model)


def _row(question="q0", model="model-0", labels=(1, 0, 1), **extra) -> str:
    return json.dumps({"question_id": question, "model": model,
                       "labels": labels if isinstance(labels, str) else list(labels), **extra})


def _file(*rows: str) -> bytes:
    return ("\n".join(rows) + "\n").encode()


def test_import_marks_tasks_golden_and_stores_references_with_rationales(project):
    data = _file(_row(rationale=["warm", None, "asks"]), _row("q1", "model-1", [0, 0, 1]))

    result = golden_import(project=project, data=data, now=timezone.now())

    assert (result.tasks, result.references, result.version) == (2, 6, 1)
    task = _task(project)
    assert task.is_golden and task.overlap == GOLDEN_OVERLAP
    refs = list(GoldenReference.objects.filter(task=task).order_by("rubric_item__position")
                .values_list("rubric_item__item_key", "value", "rationale"))
    assert refs == [("q0:1", 1, "warm"), ("q0:2", 0, ""), ("q0:3", 1, "asks")]
    assert Task.objects.filter(project=project, is_golden=True).count() == 2


def test_reimport_replaces_the_references_of_a_task(project):
    golden_import(project=project, data=_file(_row(labels=[1, 1, 1])), now=timezone.now())

    golden_import(project=project, data=_file(_row(labels=[0, 0, 0], detail=None)), now=timezone.now())

    assert list(GoldenReference.objects.values_list("value", flat=True)) == [0, 0, 0]


def test_heartbench_detail_is_accepted_for_labels(project):
    row = json.dumps({"question_id": "q0", "model": "model-0", "detail": [1, 0, 0]})

    golden_import(project=project, data=_file(row), now=timezone.now())

    assert GoldenReference.objects.count() == 3


@pytest.mark.parametrize(("row", "field", "message"), [
    (_row(question="nope"), "question_id", "unknown question 'nope'"),
    (_row(model="gpt-x"), "model", "no response by model 'gpt-x'"),
    (_row(labels=[1, 0]), "labels", "expected 3 values (one per rubric position of the question), got 2"),
    (_row(labels=[1, 0, 1, 1]), "labels", "expected 3 values"),
    (_row(labels=[1, 2, 0]), "labels[1]", "expected 0 or 1, got 2"),
    (_row(labels=[True, 0, 0]), "labels[0]", "expected 0 or 1"),
    (_row(labels="101"), "labels", "expected a list of 0/1"),
    (_row(rationale=["only one"]), "rationale", "expected 3 entries"),
    (json.dumps({"model": "model-0", "labels": [1, 0, 1]}), "question_id", "missing"),
    ("not json", None, "not valid JSON"),
])
def test_a_bad_line_writes_nothing_and_names_line_and_field(project, row, field, message):
    data = _file(_row("q1", "model-1"), row)

    with pytest.raises(DomainError) as caught:
        golden_import(project=project, data=data, now=timezone.now())

    error = caught.value.errors[0]
    assert (error["line"], error["field"]) == (2, field)
    assert message in error["message"]
    assert GoldenReference.objects.count() == 0
    assert not Task.objects.filter(is_golden=True).exists()


def test_a_row_given_twice_is_refused(project):
    with pytest.raises(DomainError) as caught:
        golden_import(project=project, data=_file(_row(), _row()), now=timezone.now())

    assert "already given on line 1" in caught.value.errors[0]["message"]
    assert GoldenReference.objects.count() == 0


def test_a_task_with_regular_work_cannot_become_golden(project):
    expert = member(project)
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    question = lease.task.response.question.external_id
    model = lease.task.response.model_name

    with pytest.raises(DomainError) as caught:
        golden_import(project=project, data=_file(_row(question, model)), now=timezone.now())

    assert "already has regular work" in caught.value.errors[0]["message"]
    assert not Task.objects.filter(is_golden=True).exists()


def test_without_a_published_version_the_import_is_refused(pm):
    project = project_create(name="empty", created_by=pm)

    with pytest.raises(DomainError) as caught:
        golden_import(project=project, data=_file(_row()), now=timezone.now())

    assert caught.value.code == "no_version"


def test_golden_tasks_never_count_as_regular_work():
    project = make_golden_project(golden=10, regular=3, control_rate_pct=0)
    expert = calibrated(project)

    leased = []
    while (lease := assignment_claim_next(project=project, expert=expert, now=timezone.now())) is not None:
        leased.append(lease.task)
        keys = [i.item_key for i in rubric_items_for_task(lease.task)]
        labels_submit(expert=expert, assignment_id=lease.pk, labels=dict.fromkeys(keys, 1), now=timezone.now())

    assert len(leased) == 3
    assert not any(t.is_golden for t in leased)
    assert not ItemConsensus.objects.filter(task__is_golden=True).exists()


def test_the_command_imports_and_reports_bad_lines(project, tmp_path):
    good = tmp_path / "golden.jsonl"
    good.write_bytes(golden_file(project, [_task(project)]))
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(_file(_row(labels=[1])))
    out, err = StringIO(), StringIO()

    call_command("import_golden", str(project.pk), str(good), stdout=out)
    with pytest.raises(CommandError):
        call_command("import_golden", str(project.pk), str(bad), stdout=StringIO(), stderr=err)

    assert "Imported 3 reference labels for 1 golden tasks" in out.getvalue()
    assert 'line 1: field "labels": expected 3 values' in err.getvalue()
    assert GoldenReference.objects.count() == 3


def test_the_api_imports_for_the_projects_pm_only(api, project, pm):
    data = golden_file(project, [_task(project)])
    token = Token.objects.create(user=pm)
    other = Token.objects.create(user=PMFactory())
    expert_token = Token.objects.create(user=member(project))
    url = f"/api/v1/projects/{project.pk}/golden/import/"

    denied = [api.post(url, {"file": SimpleUploadedFile("g.jsonl", data)}, HTTP_AUTHORIZATION=f"Token {t.key}")
              for t in (other, expert_token)]
    created = api.post(url, {"file": SimpleUploadedFile("g.jsonl", data)}, HTTP_AUTHORIZATION=f"Token {token.key}")
    refused = api.post(url, {"file": SimpleUploadedFile("g.jsonl", _file(_row(labels=[1])))},
                       HTTP_AUTHORIZATION=f"Token {token.key}")

    assert [r.status_code for r in denied] == [404, 404]
    assert created.status_code == 201
    assert created.json() == {"tasks": 1, "references": 3, "version": 1}
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["field"] == "labels"
    assert GoldenReference.objects.count() == 3


def test_the_page_import_shows_the_errors_and_writes_nothing(client, project, pm):
    client.force_login(pm)

    response = client.post(f"/projects/{project.pk}/golden/import/",
                           {"file": SimpleUploadedFile("g.jsonl", _file(_row(question="zz")))})

    assert response.status_code == 422
    assert "unknown question" in response.content.decode()
    assert GoldenReference.objects.count() == 0


def test_reference_bits_are_mixed():
    assert set(reference_bits("q3", 4)) == {0, 1}
