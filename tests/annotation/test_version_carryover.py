"""A new rubric version keeps the work that is still valid: a change that rewords one item of one question.

Golden questions are q0..q11 (one response each), regular ones q12..q15. Three calibrated experts
finish every regular task; q12 then gets a second response, half worked: one submission and one
open lease. The draft rewords q12:1 only.
"""
import json
import random
from decimal import Decimal

import numpy as np
import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.agreement.report import material_load
from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, GoldenReference, ItemConsensus, Label, Question, Task
from annotation.rubric_editing.publishing import rubric_version_publish
from annotation.rubric_editing.services import rubric_draft_item_update, rubric_draft_start
from annotation.selectors import rubric_items_for_task, rubric_version_current
from annotation.submission.services import labels_submit
from core.errors import DomainError
from experts.models import Notification
from payments.ledger import earnings_sweep
from payments.models import LedgerEntry
from rubrics.models import RubricItem
from tests.factories import ExpertFactory, PMFactory, ResponseFactory
from tests.support.quality import calibrated, make_golden_project

pytestmark = pytest.mark.django_db


def _submit(expert, assignment, value=1):
    keys = [i.item_key for i in rubric_items_for_task(assignment.task)]
    labels_submit(expert=expert, assignment_id=assignment.pk, labels=dict.fromkeys(keys, value),
                  now=timezone.now())


def _work_all(expert, project):
    while (lease := assignment_claim_next(project=project, expert=expert, now=timezone.now())) is not None:
        _submit(expert, lease)


@pytest.fixture
def pm():
    return PMFactory()


@pytest.fixture
def world(pm):
    project = make_golden_project(golden=12, regular=4, pm=pm, control_rate_pct=0)
    panel = [calibrated(project) for _ in range(3)]
    for expert in panel:
        _work_all(expert, project)
    old = rubric_version_current(project)
    q12 = Question.objects.get(project=project, external_id="q12")
    extra = Task.objects.create(project=project, response=ResponseFactory(question=q12, project=project,
                                                                          model_name="model-x"),
                                rubric_version=old, overlap=project.overlap, shuffle_key=random.getrandbits(62))
    latecomer = calibrated(project)
    # Only the new task is left in the pool, so these leases land on it.
    first = assignment_claim_next(project=project, expert=panel[0], now=timezone.now())
    _submit(panel[0], first)
    held = assignment_claim_next(project=project, expert=latecomer, now=timezone.now())
    assert first.task_id == held.task_id == extra.pk
    earnings_sweep(now=timezone.now())
    draft = rubric_draft_start(project=project)
    item = RubricItem.objects.get(version=draft, item_key="q12:1")
    rubric_draft_item_update(project=project, item_id=item.pk, content="names the feeling in the user's words",
                             score=item.score, dimension=item.dimension.code)
    return {"project": project, "panel": panel, "latecomer": latecomer, "old": old, "draft": draft,
            "extra": extra, "held": held}


def _regular(project, version, question=None):
    tasks = Task.objects.filter(project=project, rubric_version=version, is_golden=False)
    return tasks.filter(response__question__external_id=question) if question else tasks


def _publish(world, pm):
    return rubric_version_publish(project=world["project"], version=world["draft"], reason="reword q12:1",
                                  now=timezone.now(), by=pm)


def _api(api, user):
    token, _ = Token.objects.get_or_create(user=user)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return api


def test_only_the_reworded_question_gets_new_tasks(world, pm):
    project, old = world["project"], world["old"]
    carried_before = {t.pk for t in _regular(project, old).exclude(response__question__external_id="q12")}

    version = _publish(world, pm)

    assert {t.pk for t in _regular(project, version).exclude(response__question__external_id="q12")} == carried_before
    new_q12 = _regular(project, version, "q12")
    assert new_q12.count() == 2
    assert all(t.submitted_count == 0 and t.status == "open" for t in new_q12)
    assert not _regular(project, old).exclude(response__question__external_id="q12").exists()


def test_unchanged_questions_keep_their_labels_and_consensus_on_the_new_items(world, pm):
    project, old = world["project"], world["old"]
    carried = list(_regular(project, old).exclude(response__question__external_id="q12"))
    labels_before = sorted(Label.objects.filter(task__in=carried)
                           .values_list("assignment_id", "rubric_item__item_key", "value"))
    consensus_before = sorted(ItemConsensus.objects.filter(task__in=carried)
                              .values_list("task_id", "rubric_item__item_key", "majority", "zone"))

    version = _publish(world, pm)

    labels = Label.objects.filter(task__in=carried)
    assert sorted(labels.values_list("assignment_id", "rubric_item__item_key", "value")) == labels_before
    assert set(labels.values_list("rubric_item__version_id", flat=True)) == {version.pk}
    consensus = ItemConsensus.objects.filter(task__in=carried)
    assert sorted(consensus.values_list("task_id", "rubric_item__item_key", "majority", "zone")) == consensus_before
    assert len(consensus_before) == 3 * 3
    assert set(consensus.values_list("rubric_item__version_id", flat=True)) == {version.pk}
    assert all(t.status == "complete" for t in Task.objects.filter(pk__in=[t.pk for t in carried]))


def test_golden_references_carry_over(world, pm):
    before = GoldenReference.objects.filter(task__rubric_version=world["old"]).count()

    version = _publish(world, pm)

    assert before == 12 * 3
    assert GoldenReference.objects.filter(task__rubric_version=version, task__is_golden=True).count() == before


def test_carried_work_is_not_paid_twice(world, pm):
    project = world["project"]
    paid = LedgerEntry.objects.count()
    assert paid > 0

    _publish(world, pm)
    earnings_sweep(now=timezone.now())
    # The panel is offered only the reworded question's new tasks, nothing it already did and was paid for.
    leases = [assignment_claim_next(project=project, expert=e, now=timezone.now()) for e in world["panel"]]

    assert LedgerEntry.objects.count() == paid
    assert {a.task.response.question.external_id for a in leases if a is not None} == {"q12"}


def test_an_open_lease_on_a_superseded_task_ends_and_its_expert_is_told(world, pm):
    extra, held, latecomer = world["extra"], world["held"], world["latecomer"]

    version = _publish(world, pm)

    extra.refresh_from_db()
    assert extra.status == "superseded" and extra.rubric_version_id == world["old"].pk
    assert Assignment.objects.get(pk=held.pk).status == "released"
    note = Notification.objects.get(user=latecomer, kind="task_superseded")
    assert f"version {version.number}" in note.message
    assert note.link == f"/projects/{world['project'].pk}/rubric/versions/"
    # The submitted half stays for audit; the expert who submitted it is not told anything.
    assert Label.objects.filter(task=extra).count() == 3
    assert not Notification.objects.filter(user=world["panel"][0], kind="task_superseded").exists()
    # The superseded task is never offered again, not even to someone new.
    newcomer = calibrated(world["project"])
    lease = assignment_claim_next(project=world["project"], expert=newcomer, now=timezone.now())
    assert lease.task.rubric_version_id == version.pk


def test_the_impact_names_the_change_and_the_work_it_touches(api, world, pm):
    body = _api(api, pm).get(f"/api/v1/projects/{world['project'].pk}/rubric-versions/draft/impact/").json()

    assert body["questions"] == [{"question_id": "q12", "items": {"reworded": ["q12:1"]}}]
    # q12's finished task and its half-worked second response.
    assert (body["tasks"], body["submitted_labels"], body["golden_tasks"]) == (2, 3 * 3 + 3, 0)
    assert (body["experts"], body["open_leases"]) == (4, 1)
    assert (body["carried_tasks"], body["new_tasks"]) == (3, 2)
    # 2 new tasks × overlap 3 at the default normal price (5.00) and the lowest tier.
    assert (Decimal(body["cost"]), body["currency"]) == (Decimal("30.00"), "CNY")
    assert body["recalibration"] is False


def test_the_draft_page_shows_the_impact(client, world, pm):
    client.force_login(pm)

    page = client.get(f"/projects/{world['project'].pk}/rubric/").content.decode()

    assert 'id="impact-tasks">2<' in page and 'id="impact-carried">3<' in page
    assert 'id="impact-cost">30.00 CNY<' in page


def test_the_impact_of_a_golden_change_names_the_golden_task_and_recalibration(api, world, pm):
    project, draft = world["project"], world["draft"]
    item = RubricItem.objects.get(version=draft, item_key="q3:2")
    rubric_draft_item_update(project=project, item_id=item.pk, content=item.content, score=9,
                             dimension=item.dimension.code)

    body = _api(api, pm).get(f"/api/v1/projects/{project.pk}/rubric-versions/draft/impact/").json()

    assert {q["question_id"]: q["items"] for q in body["questions"]} == {
        "q12": {"reworded": ["q12:1"]}, "q3": {"rescored": ["q3:2"]}}
    assert (body["golden_tasks"], body["recalibration"]) == (1, True)


def test_the_changelog_is_readable_by_the_projects_experts_and_404_for_others(api, client, world, pm):
    version = _publish(world, pm)
    project, expert = world["project"], world["panel"][1]

    client.force_login(expert)
    page = client.get(f"/projects/{project.pk}/rubric/versions/")
    rows = _api(api, expert).get(f"/api/v1/projects/{project.pk}/rubric-versions/").json()

    assert page.status_code == 200
    text = page.content.decode()
    assert "reword q12:1" in text and pm.get_username() in text and "names the feeling" in text
    assert rows[0]["number"] == version.number and rows[0]["published_by"] == pm.get_username()
    assert rows[0]["reason"] == "reword q12:1"
    assert rows[0]["diff"]["changed"] == [{"item_key": "q12:1", "fields": ["content"]}]
    assert rows[-1]["diff"] is None
    outsider = ExpertFactory()
    client.force_login(outsider)
    assert client.get(f"/projects/{project.pk}/rubric/versions/").status_code == 404
    assert _api(api, outsider).get(f"/api/v1/projects/{project.pk}/rubric-versions/").status_code == 404
    assert _api(api, PMFactory()).get(f"/api/v1/projects/{project.pk}/rubric-versions/").status_code == 404


def test_the_rubric_and_guidelines_pages_link_to_the_changelog(client, world, pm):
    project = world["project"]
    _publish(world, pm)
    url = f"/projects/{project.pk}/rubric/versions/"

    client.force_login(pm)
    assert url in client.get(f"/projects/{project.pk}/rubric/").content.decode()
    client.force_login(world["panel"][0])
    assert url in client.get(f"/projects/{project.pk}/guidelines/").content.decode()


def test_the_compare_page_shows_shared_items_under_each_version(client, world, pm):
    project = world["project"]
    version = _publish(world, pm)
    client.force_login(pm)

    page = client.get(f"/projects/{project.pk}/rubric/versions/compare/",
                      {"a": world["old"].number, "b": version.number})

    assert page.status_code == 200
    text = page.content.decode()
    # The reworded item: its finished task stayed under the old version, the new one has no consensus yet.
    row = text.split('id="compare-q12:1"')[1].split("</tr>")[0]
    assert "改写措辞" in row and '"compare-a">100% (1)' in row and '"compare-b">— (0)' in row
    # A carried item counts under the new version only.
    row = text.split('id="compare-q13:1"')[1].split("</tr>")[0]
    assert '"compare-a">— (0)' in row and '"compare-b">100% (1)' in row
    assert client.get(f"/projects/{project.pk}/rubric/versions/compare/", {"a": 99, "b": 1}).status_code == 404
    client.force_login(world["panel"][0])
    assert client.get(f"/projects/{project.pk}/rubric/versions/compare/").status_code == 404


def test_the_reports_of_the_new_version_cover_the_carried_work(world, pm):
    project = world["project"]
    carried = list(_regular(project, world["old"]).exclude(response__question__external_id="q12")
                   .values_list("pk", flat=True))

    version = _publish(world, pm)
    material = material_load(project=project, version=version)

    # Every unit (task × item) of the three carried tasks, with all three labels, and nothing of q12 yet.
    covered = set(material.task_id[material.unit_task].tolist())
    assert covered == set(carried)
    assert (material.labels >= 0).sum() == 3 * 3 * 3


def test_the_impact_is_404_for_other_pms_and_experts_and_a_draft_cannot_be_compared(api, client, world, pm):
    project = world["project"]
    url = f"/api/v1/projects/{project.pk}/rubric-versions/draft/impact/"

    assert _api(api, PMFactory()).get(url).status_code == 404
    assert _api(api, world["panel"][0]).get(url).status_code == 404
    client.force_login(pm)
    compare = f"/projects/{project.pk}/rubric/versions/compare/"
    assert client.get(compare, {"a": world["old"].number, "b": world["draft"].number}).status_code == 404
    assert client.get(compare, {"a": "x", "b": world["old"].number}).status_code == 404


def test_publishing_again_carries_nothing_twice(world, pm):
    project = world["project"]
    version = _publish(world, pm)
    tasks = Task.objects.filter(project=project).count()

    with pytest.raises(DomainError):
        rubric_version_publish(project=project, version=world["draft"], reason="again", now=timezone.now(), by=pm)

    assert Task.objects.filter(project=project).count() == tasks
    assert rubric_version_current(project) == version


def test_a_submission_that_read_its_items_before_the_publish_labels_the_new_items(world, pm, monkeypatch):
    project = world["project"]
    q13 = Question.objects.get(project=project, external_id="q13")
    task = Task.objects.create(project=project, response=ResponseFactory(question=q13, project=project,
                                                                         model_name="model-y"),
                               rubric_version=world["old"], overlap=project.overlap,
                               shuffle_key=random.getrandbits(62))
    expert = world["latecomer"]
    # Free the latecomer's lease on q12's second response (its slot with it), so the new q13 task is theirs.
    Assignment.objects.filter(pk=world["held"].pk).update(status="released")
    Task.objects.filter(pk=world["extra"].pk).update(live_count=1)
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    assert lease.task_id == task.pk
    stale = Assignment.objects.select_related("task__response__question", "task__project").get(pk=lease.pk)
    # The submission reads the task (and so its items) before the publish commits...
    monkeypatch.setattr("annotation.submission.services.assignment_get_for_expert", lambda user, pk: stale)
    version = _publish(world, pm)

    # ...and writes its labels after it, under the task lock.
    labels_submit(expert=expert, assignment_id=lease.pk, labels={"q13:1": 1, "q13:2": 0, "q13:3": 1},
                  now=timezone.now())

    assert set(Label.objects.filter(assignment=lease).values_list("rubric_item__version_id", flat=True)) == {
        version.pk}


def test_the_judges_answers_on_unchanged_questions_carry_over_and_the_changed_ones_are_superseded(world, pm):
    from annotation.agreement.report import judge_vector
    from annotation.exchange.judge_labels import judge_labels_import
    from annotation.judging.runs import judge_run_progress
    from annotation.models import JudgeLabel, JudgeRun, JudgeTaskResult

    project, old = world["project"], world["old"]
    lines = []
    for task in _regular(project, old).select_related("response__question"):
        n_items = len(rubric_items_for_task(task))
        lines.append(json.dumps({"question_id": task.response.question.external_id, "model": task.response.model_name,
                                 "detail": [1] * n_items, "reason": "judged on v1"}))
    run = judge_labels_import(project=project, data="\n".join(lines).encode(), run_name="v1 judge",
                              judge_model="j", now=timezone.now()).run
    carried = list(_regular(project, old).exclude(response__question__external_id="q12"))
    before = sorted(JudgeLabel.objects.filter(run=run, task__in=carried)
                    .values_list("task_id", "rubric_item__item_key", "value"))

    version = _publish(world, pm)

    run = JudgeRun.objects.get(pk=run.pk)
    assert run.rubric_version_id == version.pk
    moved = JudgeLabel.objects.filter(run=run, task__in=carried)
    assert sorted(moved.values_list("task_id", "rubric_item__item_key", "value")) == before and len(before) == 9
    assert set(moved.values_list("rubric_item__version_id", flat=True)) == {version.pk}
    # The reworded question's answers were about the old wording: kept, but no longer the run's.
    q12 = JudgeTaskResult.objects.filter(run=run, task__response__question__external_id="q12")
    assert q12.exists() and set(q12.values_list("status", flat=True)) == {"superseded"}
    assert JudgeLabel.objects.filter(run=run, task__response__question__external_id="q12",
                                     rubric_item__version=old).exists()
    progress = judge_run_progress(run)
    assert (progress["done"], progress["total"], progress["superseded"]) == (3, 3, q12.count())
    # The run's report reads the carried tasks under the new version, judged in full.
    material = material_load(project=project, version=version)
    judged = judge_vector(material, run)
    carried_units = np.isin(material.task_id[material.unit_task], [t.pk for t in carried])
    assert carried_units.sum() == 9 and (judged[carried_units] == 1).all()
