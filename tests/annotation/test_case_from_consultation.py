"""A resolved consultation becomes a case in the library: the PM's form is written from it, the case keeps
the link both ways, one case per consultation, and only a resolved consultation of the project qualifies."""
import pytest
from django.utils import timezone

from annotation.consultations.opening import consultation_open_by_pm
from annotation.consultations.services import consultation_post, consultation_resolve
from annotation.library.services import case_create
from annotation.models import Case, Consultation
from core.errors import DomainError
from rubrics.models import RubricItem
from tests.annotation.test_consultations import _revealed
from tests.factories import PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db
NOW = timezone.now()


def _resolved():
    project, pm, a, b, consultation = _revealed()
    consultation_post(user=a, consultation=consultation, text="用户只是想被听见，还没准备好听建议。", now=NOW)
    consultation_resolve(pm=pm, consultation=consultation, outcome="miss", category="guideline_gap",
                         text="只要回复在共情之前就给出建议，就算建议给得太早。",
                         suggested_text="在共情之前给出建议", now=NOW)
    consultation.refresh_from_db()
    return project, pm, a, b, consultation


def test_the_new_case_form_is_written_from_the_resolved_consultation(client):
    project, pm, a, b, consultation = _resolved()
    client.force_login(pm)

    page = client.get(f"/projects/{project.pk}/cases/new/?consultation={consultation.pk}",
                      HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()

    item = consultation.rubric_item
    assert f'name="consultation" value="{consultation.pk}"' in page
    assert item.content in page and item.item_key in page
    assert "用户只是想被听见" in page  # the discussion
    assert "只要回复在共情之前就给出建议" in page  # the agreed reading
    assert "盲投" in page  # the blind vote tally, in the PM's language
    assert 'value="miss" checked' in page or 'value="miss" selected' in page


def test_saving_links_the_case_and_the_consultation_page_then_points_to_it(client):
    project, pm, a, b, consultation = _resolved()
    client.force_login(pm)
    form = client.get(f"/projects/{project.pk}/cases/new/?consultation={consultation.pk}")
    assert form.status_code == 200

    saved = client.post(f"/projects/{project.pk}/cases/new/", {
        "consultation": consultation.pk, "title": "建议给得太早", "problem": "p", "disagreement": "d",
        "discussion": "x", "reading": "r", "outcome": "miss", "item_keys": consultation.rubric_item.item_key,
        "publish": "1"})

    case = Case.objects.get()
    assert saved.status_code == 302 and case.consultation_id == consultation.pk and case.is_published
    detail = client.get(f"/consultations/{consultation.pk}/").content.decode()
    assert f'/projects/{project.pk}/cases/{case.pk}/' in detail
    # Asking again for the form leads to the case instead of a second one.
    again = client.get(f"/projects/{project.pk}/cases/new/?consultation={consultation.pk}")
    assert again.status_code == 302 and again["Location"] == f"/projects/{project.pk}/cases/{case.pk}/"


def test_one_case_per_consultation_and_only_a_resolved_one_of_the_project():
    project, pm, a, b, consultation = _resolved()
    text = {"title": "t", "problem": "p", "disagreement": "d", "discussion": "x", "reading": "r"}
    case_create(project=project, by=pm, now=NOW, consultation=consultation, **text)

    with pytest.raises(DomainError) as taken:
        case_create(project=project, by=pm, now=NOW, consultation=consultation, **text)
    other_item = RubricItem.objects.filter(version=consultation.rubric_item.version,
                                           question_ref=consultation.rubric_item.question_ref).exclude(
        pk=consultation.rubric_item_id).first()
    consultation_open_by_pm(pm=pm, task_id=consultation.task_id, rubric_item_id=other_item.pk, reason="再看看",
                            now=NOW)
    still_open = Consultation.objects.get(rubric_item=other_item)
    with pytest.raises(DomainError) as unresolved:
        case_create(project=project, by=pm, now=NOW, consultation=still_open, **text)
    other = make_project_with_tasks(n_questions=1, pm=PMFactory())
    with pytest.raises(DomainError) as foreign:
        case_create(project=other, by=pm, now=NOW, consultation=consultation, **text)

    assert (taken.value.code, taken.value.status) == ("case_consultation_taken", 409)
    assert unresolved.value.code == "case_consultation_unresolved"
    assert foreign.value.status == 404
    assert Case.objects.count() == 1 and still_open.status != Consultation.Status.RESOLVED


def test_another_projects_pm_gets_404_for_the_prefill_and_the_post(client):
    project, pm, a, b, consultation = _resolved()
    stranger = PMFactory()
    other = make_project_with_tasks(n_questions=1, pm=stranger)
    client.force_login(stranger)

    own_form_other_consultation = client.get(f"/projects/{other.pk}/cases/new/?consultation={consultation.pk}")
    posted = client.post(f"/projects/{other.pk}/cases/new/", {
        "consultation": consultation.pk, "title": "t", "problem": "p", "disagreement": "d", "discussion": "x",
        "reading": "r"})

    assert own_form_other_consultation.status_code == 404 and posted.status_code == 404
    assert Case.objects.count() == 0
