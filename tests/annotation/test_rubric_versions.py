"""Rubric versions: draft edits, the diff, publishing with a reason, re-calibration; published never changes."""
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.assignment.services import assignment_claim_next
from annotation.calibration.services import calibration_state
from annotation.exchange.questions import questions_import
from annotation.models import CalibrationAttempt, GoldenReference, Label, Task
from annotation.rubric_editing.diff import rubric_version_diff
from annotation.rubric_editing.publishing import rubric_version_publish
from annotation.rubric_editing.services import (
    rubric_draft_item_add,
    rubric_draft_item_delete,
    rubric_draft_item_update,
    rubric_draft_start,
)
from annotation.selectors import rubric_items_for_task, rubric_version_current
from annotation.submission.services import labels_submit
from core.errors import Conflict, DomainError, Forbidden
from experts.models import Notification
from rubrics.models import RubricItem, RubricVersion
from tests.factories import AdminFactory, PMFactory
from tests.support.quality import calibrated, make_golden_project, member

pytestmark = pytest.mark.django_db


@pytest.fixture
def pm():
    return PMFactory()


@pytest.fixture
def project(pm):
    return make_golden_project(golden=12, regular=4, pm=pm, control_rate_pct=0)


def _draft_item(project, key):
    return RubricItem.objects.get(version__rubric_id=project.rubric_id, version__status="draft", item_key=key)


def _client(api, user):
    token, _ = Token.objects.get_or_create(user=user)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return api


def test_the_draft_starts_as_a_copy_and_the_diff_names_added_removed_and_changed(project):
    draft = rubric_draft_start(project=project)
    rubric_draft_item_update(project=project, item_id=_draft_item(project, "q14:1").pk, content="asks openly",
                             score=2, dimension="warmth")
    rubric_draft_item_delete(project=project, item_id=_draft_item(project, "q14:2").pk)
    added = rubric_draft_item_add(project=project, question_ref="q15", content="names the feeling", score=3,
                                  dimension="emotional-perception")

    diff = rubric_version_diff(old=rubric_version_current(project), new=draft)

    assert draft.number == 2 and draft.items.count() == 48
    assert [c.after.item_key for c in diff.changed] == ["q14:1"]
    assert set(diff.changed[0].fields) >= {"content", "score"}
    assert [i.item_key for i in diff.removed] == ["q14:2"]
    assert [i.item_key for i in diff.added] == [added.item_key] == ["q15:4"]
    assert diff.changes_standard


def test_a_removed_key_is_never_reused(project):
    rubric_draft_start(project=project)
    rubric_draft_item_delete(project=project, item_id=_draft_item(project, "q15:3").pk)

    added = rubric_draft_item_add(project=project, question_ref="q15", content="new", score=1, dimension="warmth")

    assert added.item_key == "q15:4"


@pytest.mark.parametrize(("fields", "field"), [
    ({"content": " ", "score": 1, "dimension": "warmth"}, "content"),
    ({"content": "x", "score": 1, "dimension": "kindness"}, "dimension"),
    ({"content": "x", "score": None, "dimension": "warmth"}, "score"),
    ({"content": "x", "score": 3, "dimension": "other"}, "score"),
    ({"content": "x", "score": 1000, "dimension": "warmth"}, "score"),
])
def test_a_bad_item_edit_writes_nothing(project, fields, field):
    rubric_draft_start(project=project)
    item = _draft_item(project, "q14:1")

    with pytest.raises(DomainError) as caught:
        rubric_draft_item_update(project=project, item_id=item.pk, **fields)

    assert field in [e["field"] for e in caught.value.errors]
    item.refresh_from_db()
    assert item.content == "criterion 1 of q14"


def test_publishing_a_change_records_the_changelog_and_sends_every_expert_back_to_calibration(project, pm):
    # q0 is in the golden set: experts were calibrated on its items, so a change there sends them back.
    expert = calibrated(project)
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    draft = rubric_draft_start(project=project)
    rubric_draft_item_update(project=project, item_id=_draft_item(project, "q0:1").pk, content="asks openly",
                             score=2, dimension="warmth")

    version = rubric_version_publish(project=project, version=draft, reason="clarify q0", now=timezone.now(),
                                     by=pm)

    assert (version.status, version.changelog, version.published_by) == ("published", "clarify q0", pm)
    assert CalibrationAttempt.objects.get(expert=expert).status == "stale"
    note = Notification.objects.get(user=expert)
    assert note.kind == "rubric_published" and "clarify q0" in note.message
    assert note.link == f"/projects/{project.pk}/calibration/"
    assert not Notification.objects.filter(user=pm).exists()
    # The lease is on a regular question whose items did not change: its task carried over to the
    # new version with the lease, which may be finished; its labels are on the new version's items.
    lease.task.refresh_from_db()
    assert lease.task.rubric_version_id == version.pk
    keys = [i.item_key for i in rubric_items_for_task(lease.task)]
    labels_submit(expert=expert, assignment_id=lease.pk, labels=dict.fromkeys(keys, 1), now=timezone.now())
    assert set(Label.objects.filter(assignment=lease).values_list("rubric_item__version_id", flat=True)) == {
        version.pk}
    # New leases need a calibration on the new version.
    with pytest.raises(Forbidden) as caught:
        assignment_claim_next(project=project, expert=expert, now=timezone.now())
    assert caught.value.code == "calibration_required"
    assert calibration_state(project=project, expert=expert, now=timezone.now()).status == "stale"


def test_calibration_required_goes_only_to_experts_whose_calibration_went_stale(project):
    again = calibrated(project)
    newcomer = member(project)  # never calibrated: the calibration page is where they start anyway
    draft = rubric_draft_start(project=project)
    rubric_draft_item_update(project=project, item_id=_draft_item(project, "q0:1").pk, content="asks openly",
                             score=2, dimension="warmth")
    rubric_version_publish(project=project, version=draft, reason="clarify q0", now=timezone.now())
    told_once = Notification.objects.filter(user=again, kind="rubric_published").count()
    draft = rubric_draft_start(project=project)
    rubric_draft_item_update(project=project, item_id=_draft_item(project, "q0:2").pk, content="names it",
                             score=2, dimension="warmth")

    rubric_version_publish(project=project, version=draft, reason="clarify again", now=timezone.now())

    assert told_once == 1
    # Still stale from the first change: told then, not again.
    assert Notification.objects.filter(user=again, kind="rubric_published").count() == 1
    assert not Notification.objects.filter(user=newcomer).exists()


def test_a_change_to_a_question_outside_the_golden_set_keeps_calibrations(project):
    expert = calibrated(project)
    draft = rubric_draft_start(project=project)
    rubric_draft_item_update(project=project, item_id=_draft_item(project, "q14:1").pk, content="asks openly",
                             score=2, dimension="warmth")

    rubric_version_publish(project=project, version=draft, reason="clarify q14", now=timezone.now())

    assert CalibrationAttempt.objects.get(expert=expert).status == "passed"
    assert not Notification.objects.filter(user=expert, kind="rubric_published").exists()
    assert assignment_claim_next(project=project, expert=expert, now=timezone.now()) is not None


def test_after_recalibration_new_leases_use_the_new_version(project):
    expert = calibrated(project)
    draft = rubric_draft_start(project=project)
    rubric_draft_item_update(project=project, item_id=_draft_item(project, "q0:1").pk, content="asks openly",
                             score=2, dimension="warmth")
    version = rubric_version_publish(project=project, version=draft, reason="clarify", now=timezone.now())

    calibrated(project, expert)
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())

    assert lease.task.rubric_version_id == version.pk
    assert CalibrationAttempt.objects.filter(expert=expert, status="passed").get().rubric_version_id == version.pk


def test_the_golden_set_carries_over_except_for_changed_questions(project):
    draft = rubric_draft_start(project=project)
    rubric_draft_item_update(project=project, item_id=_draft_item(project, "q0:1").pk, content="changed",
                             score=1, dimension="warmth")

    version = rubric_version_publish(project=project, version=draft, reason="q0 changed", now=timezone.now())

    golden_new = Task.objects.filter(rubric_version=version, is_golden=True).select_related("response__question")
    assert golden_new.count() == 12
    complete = {t.response.question.external_id for t in golden_new
                if GoldenReference.objects.filter(task=t).count() == 3}
    assert "q0" not in complete and len(complete) == 11
    assert not GoldenReference.objects.filter(task__rubric_version=version,
                                              task__response__question__external_id="q0").exists()


def test_a_question_import_that_only_adds_questions_keeps_calibrations(project):
    expert = calibrated(project)
    row = {"question_id": "new-1", "dialogue": [{"role": "A", "content": "我睡不着。"}],
           "rubric": [{"dimension": "温暖", "score": 2, "content": "warm"}]}

    result = questions_import(project=project, data=json.dumps(row, ensure_ascii=False).encode(),
                              now=timezone.now())

    assert result.version == 2
    assert CalibrationAttempt.objects.get(expert=expert).status == "passed"
    assert not Notification.objects.filter(user=expert).exists()
    assert assignment_claim_next(project=project, expert=expert, now=timezone.now()) is not None


def test_publishing_an_unchanged_draft_or_without_a_reason_is_refused(project):
    draft = rubric_draft_start(project=project)

    with pytest.raises(DomainError) as unchanged:
        rubric_version_publish(project=project, version=draft, reason="nothing", now=timezone.now())
    rubric_draft_item_update(project=project, item_id=_draft_item(project, "q1:1").pk, content="x", score=1,
                             dimension="warmth")
    with pytest.raises(DomainError) as no_reason:
        rubric_version_publish(project=project, version=draft, reason="  ", now=timezone.now())

    assert unchanged.value.code == "no_changes"
    assert no_reason.value.errors == [{"field": "reason", "message": "required"}]
    draft.refresh_from_db()
    assert draft.status == "draft"


def test_the_api_edits_the_draft_diffs_and_publishes(api, project, pm):
    client = _client(api, pm)
    expert = calibrated(project)

    started = client.post(f"/api/v1/projects/{project.pk}/rubric-versions/draft/")
    item_id = next(i["id"] for i in started.json()["items"] if i["item_key"] == "q3:2")
    edited = client.patch(f"/api/v1/projects/{project.pk}/rubric-items/{item_id}/",
                          {"content": "clearer", "score": 5, "dimension": "morality"}, format="json")
    added = client.post(f"/api/v1/projects/{project.pk}/rubric-versions/draft/items/",
                        {"question_id": "q3", "content": "new", "score": 1, "dimension": "morality"}, format="json")
    diff = client.get(f"/api/v1/projects/{project.pk}/rubric-versions/draft/").json()["diff"]
    no_reason = client.post(f"/api/v1/projects/{project.pk}/rubric-versions/2/publish/", {"reason": ""},
                            format="json")
    published = client.post(f"/api/v1/projects/{project.pk}/rubric-versions/2/publish/", {"reason": "clearer q3"},
                            format="json")
    again = client.post(f"/api/v1/projects/{project.pk}/rubric-versions/2/publish/", {"reason": "again"},
                        format="json")

    assert started.status_code == 201 and started.json()["draft"] == 2
    assert edited.status_code == 200 and edited.json()["content"] == "clearer"
    assert added.status_code == 201 and added.json()["item_key"] == "q3:4"
    assert diff["changed"] == [{"item_key": "q3:2", "fields": ["content", "score", "dimension"]}]
    assert diff["added"] == ["q3:4"] and diff["changes_standard"] is True
    assert no_reason.status_code == 400
    assert published.status_code == 200
    assert published.json()["changelog"] == "clearer q3" and published.json()["status"] == "published"
    assert again.status_code == 400 and again.json()["code"] == "already_published"
    assert CalibrationAttempt.objects.get(expert=expert).status == "stale"


def test_a_published_version_cannot_change_through_the_api(api, project, pm):
    published_item = RubricItem.objects.get(version=rubric_version_current(project), item_key="q2:1")
    client = _client(api, pm)

    patched = client.patch(f"/api/v1/projects/{project.pk}/rubric-items/{published_item.pk}/",
                           {"content": "hacked", "score": 1, "dimension": "warmth"}, format="json")
    deleted = client.delete(f"/api/v1/projects/{project.pk}/rubric-items/{published_item.pk}/")
    republished = client.post(f"/api/v1/projects/{project.pk}/rubric-versions/1/publish/", {"reason": "x"},
                              format="json")

    assert (patched.status_code, deleted.status_code) == (409, 409)
    assert republished.status_code == 400
    published_item.refresh_from_db()
    assert published_item.content == "criterion 1 of q2"


def test_a_published_version_cannot_change_through_the_orm(project):
    version = rubric_version_current(project)

    with pytest.raises(IntegrityError), transaction.atomic():
        RubricItem.objects.filter(version=version).update(content="hacked")
    with pytest.raises(IntegrityError), transaction.atomic():
        RubricVersion.objects.filter(pk=version.pk).update(changelog="rewritten")
    with pytest.raises(IntegrityError), transaction.atomic():
        RubricItem.objects.filter(version=version).delete()

    assert not RubricItem.objects.filter(version=version, content="hacked").exists()
    assert RubricItem.objects.filter(version=version).count() == 48


def test_a_published_version_cannot_change_through_the_admin(client, project):
    admin = AdminFactory()
    client.force_login(admin)
    version = rubric_version_current(project)
    item = RubricItem.objects.get(version=version, item_key="q2:1")

    item_post = client.post(f"/admin/rubrics/rubricitem/{item.pk}/change/",
                            {"content": "hacked", "score": 1, "dimension": item.dimension_id})
    item_delete = client.post(f"/admin/rubrics/rubricitem/{item.pk}/delete/", {"post": "yes"})
    version_post = client.post(f"/admin/rubrics/rubricversion/{version.pk}/change/", {"changelog": "rewritten"})
    version_page = client.get(f"/admin/rubrics/rubricversion/{version.pk}/change/")

    assert (item_post.status_code, item_delete.status_code, version_post.status_code) == (403, 403, 403)
    assert version_page.status_code == 200 and 'name="changelog"' not in version_page.content.decode()
    item.refresh_from_db()
    assert item.content == "criterion 1 of q2"


def test_draft_items_are_editable_in_the_admin(client, project):
    client.force_login(AdminFactory())
    rubric_draft_start(project=project)
    item = _draft_item(project, "q2:1")

    page = client.get(f"/admin/rubrics/rubricitem/{item.pk}/change/")

    assert page.status_code == 200 and 'name="content"' in page.content.decode()


def test_other_pms_and_experts_get_404_on_every_rubric_endpoint(api, client, project):
    rubric_draft_start(project=project)
    item = _draft_item(project, "q2:1")
    others = [PMFactory(), calibrated(project)]
    for other in others:
        c = _client(api, other)
        client.force_login(other)
        codes = [
            c.get(f"/api/v1/projects/{project.pk}/rubric-versions/draft/").status_code,
            c.post(f"/api/v1/projects/{project.pk}/rubric-versions/draft/").status_code,
            c.post(f"/api/v1/projects/{project.pk}/rubric-versions/draft/items/",
                   {"question_id": "q2", "content": "x", "score": 1, "dimension": "warmth"},
                   format="json").status_code,
            c.patch(f"/api/v1/projects/{project.pk}/rubric-items/{item.pk}/",
                    {"content": "x", "score": 1, "dimension": "warmth"}, format="json").status_code,
            c.delete(f"/api/v1/projects/{project.pk}/rubric-items/{item.pk}/").status_code,
            c.post(f"/api/v1/projects/{project.pk}/rubric-versions/2/publish/", {"reason": "x"},
                   format="json").status_code,
            client.get(f"/projects/{project.pk}/rubric/").status_code,
            client.post(f"/projects/{project.pk}/rubric/items/{item.pk}/",
                        {"content": "x", "score": "1", "dimension": "warmth"}).status_code,
            client.post(f"/projects/{project.pk}/rubric/publish/", {"version": "2", "reason": "x"}).status_code,
        ]
        assert codes == [404] * 9
    item.refresh_from_db()
    assert item.content == "criterion 1 of q2"
    assert RubricVersion.objects.filter(rubric_id=project.rubric_id, status="draft").count() == 1


def test_an_item_of_another_project_is_404(api, project, pm):
    other_project = make_golden_project(golden=0, regular=1)
    rubric_draft_start(project=other_project)
    foreign = RubricItem.objects.filter(version__rubric_id=other_project.rubric_id, version__status="draft").first()

    response = _client(api, pm).patch(f"/api/v1/projects/{project.pk}/rubric-items/{foreign.pk}/",
                                      {"content": "x", "score": 1, "dimension": "warmth"}, format="json")

    assert response.status_code == 404


def test_the_editor_page_edits_and_publishes(client, project, pm):
    client.force_login(pm)
    expert = calibrated(project)

    empty = client.get(f"/projects/{project.pk}/rubric/?question=q5")
    client.post(f"/projects/{project.pk}/rubric/draft/", {"question": "q5"})
    item = _draft_item(project, "q5:1")
    edited = client.post(f"/projects/{project.pk}/rubric/items/{item.pk}/",
                         {"content": "sharper", "score": "2", "dimension": "warmth"})
    page = client.get(f"/projects/{project.pk}/rubric/?question=q5")
    refused = client.post(f"/projects/{project.pk}/rubric/publish/", {"version": "2", "reason": ""})
    published = client.post(f"/projects/{project.pk}/rubric/publish/", {"version": "2", "reason": "sharper q5"})

    assert "Start a draft" in empty.content.decode() or "start-draft" in empty.content.decode()
    assert edited.status_code == 302
    body = page.content.decode()
    assert "sharper" in body and "publish-form" in body
    assert refused.status_code == 422
    assert published.status_code == 302
    assert RubricVersion.objects.get(rubric_id=project.rubric_id, number=2).changelog == "sharper q5"
    assert CalibrationAttempt.objects.get(expert=expert).status == "stale"


def test_golden_reimport_after_a_change_makes_the_question_usable_again(api, project, pm):
    draft = rubric_draft_start(project=project)
    rubric_draft_item_update(project=project, item_id=_draft_item(project, "q0:1").pk, content="changed",
                             score=1, dimension="warmth")
    version = rubric_version_publish(project=project, version=draft, reason="q0", now=timezone.now())
    task = Task.objects.get(rubric_version=version, response__question__external_id="q0")
    row = {"question_id": "q0", "model": task.response.model_name, "labels": [1, 1, 0]}

    response = _client(api, pm).post(f"/api/v1/projects/{project.pk}/golden/import/",
                                     {"file": SimpleUploadedFile("g.jsonl", json.dumps(row).encode())})

    assert response.status_code == 201
    assert GoldenReference.objects.filter(task=task).count() == 3


def test_conflict_for_items_of_a_published_version_in_the_service(project):
    item = RubricItem.objects.get(version=rubric_version_current(project), item_key="q1:1")

    with pytest.raises(Conflict):
        rubric_draft_item_update(project=project, item_id=item.pk, content="x", score=1, dimension="warmth")


def test_removing_a_draft_item_asks_first_naming_the_item_and_its_labels(client, project, pm):
    expert = calibrated(project)
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    keys = [i.item_key for i in rubric_items_for_task(lease.task)]
    labels_submit(expert=expert, assignment_id=lease.pk, labels=dict.fromkeys(keys, 1), now=timezone.now())
    rubric_draft_start(project=project)
    item = _draft_item(project, keys[0])
    client.force_login(pm)
    url = f"/projects/{project.pk}/rubric/items/{item.pk}/delete/"

    asked = client.post(url, {"question": item.question_ref})
    still_there = RubricItem.objects.filter(pk=item.pk).exists()
    done = client.post(url, {"question": item.question_ref, "confirmed": "yes"})

    question = asked.content.decode()
    assert asked.status_code == 200 and keys[0] in question and 'name="confirmed"' in question
    assert "下一个发布的版本不再包含它" in question and "已在 v1 下对它作出的 1 条标注" in question
    assert still_there
    assert done.status_code == 302 and not RubricItem.objects.filter(pk=item.pk).exists()
    assert Label.objects.filter(assignment=lease).count() == len(keys)


def test_removing_an_item_of_another_project_or_a_published_one_is_refused_on_the_first_step(client, project, pm):
    rubric_draft_start(project=project)
    other = make_golden_project(golden=2, regular=1, pm=PMFactory(), control_rate_pct=0)
    rubric_draft_start(project=other)
    foreign = _draft_item(other, "q1:1")
    published = RubricItem.objects.get(version=rubric_version_current(project), item_key="q2:1")
    client.force_login(pm)

    foreign_step = client.post(f"/projects/{project.pk}/rubric/items/{foreign.pk}/delete/")
    published_step = client.post(f"/projects/{project.pk}/rubric/items/{published.pk}/delete/",
                                 {"confirmed": "yes"})

    assert foreign_step.status_code == 404 and published_step.status_code == 422
    assert RubricItem.objects.filter(pk__in=[foreign.pk, published.pk]).count() == 2
