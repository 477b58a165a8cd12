"""Ties and thin panels: a tie is never a hit or a miss; an extra expert resolves it within the cap."""
import random
import re

import numpy as np
import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from annotation.agreement.material import derive
from annotation.agreement.report import material_load, report_params
from annotation.agreement.sections import experts_section, judge_section, leaderboard_section
from annotation.agreement.services import agreement_report_compute
from annotation.assignment.services import assignment_claim_next
from annotation.models import Assignment, ItemConsensus, Task
from annotation.projects.fields import settings_clean
from annotation.projects.services import project_settings_update
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from annotation.submission.services import labels_submit
from core.errors import DomainError
from rubrics.models import RubricVersion
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks

pytestmark = pytest.mark.django_db


def _experts(project, n):
    experts = [ExpertFactory() for _ in range(n)]
    for e in experts:
        project_add_member(project=project, user=e)
    return experts


def _submit(expert, project, votes):
    """Claim the expert's next task and label its items with `votes` (item position -> 0/1)."""
    lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
    assert lease is not None
    items = rubric_items_for_task(lease.task)
    labels = {i.item_key: votes[i.position] for i in items}
    labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())
    return lease


def test_a_one_one_split_at_overlap_two_is_tied_and_draws_one_more_expert():
    project = make_project_with_tasks(n_questions=1, items_per_question=2, overlap=2)
    a, b, c, d = _experts(project, 4)
    _submit(a, project, {1: 1, 2: 1})
    _submit(b, project, {1: 0, 2: 1})

    task = Task.objects.get()
    tied = ItemConsensus.objects.get(rubric_item__position=1)
    assert (tied.zone, tied.majority, tied.provenance) == ("tied", None, "")
    assert ItemConsensus.objects.get(rubric_item__position=2).provenance == "unanimous"
    assert (task.status, task.overlap, task.extra_slots) == ("open", 3, 1)
    # Nobody who held the task is offered it again; the extra slot goes to a new expert.
    assert assignment_claim_next(project=project, expert=a, now=timezone.now()) is None

    extra = _submit(c, project, {1: 1, 2: 0})

    assert extra.slot == 3
    resolved = ItemConsensus.objects.get(rubric_item__position=1)
    assert (resolved.zone, resolved.majority, resolved.hit_votes, resolved.total_votes) == ("split", 1, 2, 3)
    assert resolved.provenance == "extra_expert"
    # Item 2 was decided by the first panel already: the extra vote only splits it.
    second = ItemConsensus.objects.get(rubric_item__position=2)
    assert (second.zone, second.majority, second.provenance) == ("split", 1, "majority")
    task.refresh_from_db()
    assert task.status == "complete"
    assert assignment_claim_next(project=project, expert=d, now=timezone.now()) is None


def test_an_extra_expert_is_drawn_only_while_a_tie_remains_and_never_past_the_cap():
    project = make_project_with_tasks(n_questions=1, items_per_question=1, overlap=2)
    project_settings_update(project=project, values={"tie_extra_cap": 2}, changed_by=None, now=timezone.now())
    experts = _experts(project, 6)
    # 1-1 draws an extra expert; 2-1 is decided, so no second extra although the cap allows it.
    for expert, vote in zip(experts[:3], [1, 0, 1]):
        _submit(expert, project, {1: vote})
    task = Task.objects.get()
    assert (task.status, task.extra_slots) == ("complete", 1)  # 2-1: decided, no more slots

    project2 = make_project_with_tasks(n_questions=1, items_per_question=1, overlap=4)
    project_settings_update(project=project2, values={"tie_extra_cap": 1}, changed_by=None, now=timezone.now())
    panel = _experts(project2, 6)
    for expert, vote in zip(panel[:4], [1, 1, 0, 0]):
        _submit(expert, project2, {1: vote})
    task2 = Task.objects.get(project=project2)
    assert (task2.overlap, task2.extra_slots, task2.status) == (5, 1, "open")
    _submit(panel[4], project2, {1: 0})
    task2.refresh_from_db()
    verdict = ItemConsensus.objects.get(task=task2)
    assert (verdict.zone, verdict.majority, verdict.provenance) == ("split", 0, "extra_expert")
    assert (task2.status, task2.overlap) == ("complete", 5)
    assert assignment_claim_next(project=project2, expert=panel[5], now=timezone.now()) is None


def test_with_extra_experts_off_a_tie_stays_tied_and_the_task_completes():
    project = make_project_with_tasks(n_questions=1, items_per_question=1, overlap=2)
    project_settings_update(project=project, values={"tie_extra_experts": "off"}, changed_by=None,
                            now=timezone.now())
    a, b, c = _experts(project, 3)
    _submit(a, project, {1: 1})
    _submit(b, project, {1: 0})

    task = Task.objects.get()
    assert (task.status, task.overlap, task.extra_slots) == ("complete", 2, 0)
    assert ItemConsensus.objects.get().zone == "tied"
    assert assignment_claim_next(project=project, expert=c, now=timezone.now()) is None


def test_cap_zero_means_no_extra_expert():
    project = make_project_with_tasks(n_questions=1, items_per_question=1, overlap=2)
    project_settings_update(project=project, values={"tie_extra_cap": "0"}, changed_by=None, now=timezone.now())
    a, b = _experts(project, 2)
    _submit(a, project, {1: 1})
    _submit(b, project, {1: 0})
    assert Task.objects.get().status == "complete"


@pytest.mark.parametrize("bad", [-1, 6, "two", 1.5, True])
def test_the_cap_setting_refuses_values_outside_its_range(bad):
    with pytest.raises(DomainError) as err:
        settings_clean({"tie_extra_cap": bad})
    assert err.value.errors[0]["field"] == "tie_extra_cap"


@pytest.mark.parametrize("bad", ["maybe", 2, None])
def test_the_switch_refuses_anything_but_on_or_off(bad):
    with pytest.raises(DomainError):
        settings_clean({"tie_extra_experts": bad})


def test_overlap_one_gives_zone_single_never_unanimous():
    project = make_project_with_tasks(n_questions=2, items_per_question=2, overlap=1)
    (expert,) = _experts(project, 1)
    _submit(expert, project, {1: 1, 2: 0})
    _submit(expert, project, {1: 0, 2: 0})

    rows = ItemConsensus.objects.all()
    assert {r.zone for r in rows} == {"single"}
    assert {r.provenance for r in rows} == {"single"}
    assert sorted(r.majority for r in rows) == [0, 0, 0, 1]
    panel = experts_section(material_load(project=project, version=RubricVersion.objects.get()))
    assert (panel["overall"]["single"], panel["overall"]["unanimous"]) == (4, 0)


def test_the_database_refuses_a_tie_with_a_majority():
    project = make_project_with_tasks(n_questions=1, items_per_question=1, overlap=2)
    a, b = _experts(project, 2)
    _submit(a, project, {1: 1})
    _submit(b, project, {1: 0})
    with pytest.raises(IntegrityError), transaction.atomic():
        ItemConsensus.objects.update(majority=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        ItemConsensus.objects.update(zone="split")


@pytest.mark.parametrize("overlap", [2, 4])
def test_planted_truth_ties_are_never_counted_and_extra_experts_recover_the_truth(overlap):
    """Experts who are right 80% of the time label planted hits/misses; ties go to extra experts."""
    rng = random.Random(overlap)
    project = make_project_with_tasks(n_questions=12, items_per_question=3, overlap=overlap)
    project_settings_update(project=project, values={"tie_extra_cap": 2}, changed_by=None, now=timezone.now())
    version = RubricVersion.objects.get()
    truth = {item.pk: rng.randint(0, 1) for item in version.items.all()}
    experts = _experts(project, overlap + 3)
    ties_seen = 0
    for _ in range(200):
        progressed = False
        for expert in experts:
            lease = assignment_claim_next(project=project, expert=expert, now=timezone.now())
            if lease is None:
                continue
            progressed = True
            labels = {i.item_key: truth[i.pk] if rng.random() < 0.8 else 1 - truth[i.pk]
                      for i in rubric_items_for_task(lease.task)}
            labels_submit(expert=expert, assignment_id=lease.pk, labels=labels, now=timezone.now())
            ties_seen += ItemConsensus.objects.filter(zone="tied").count()
        if not progressed:
            break

    assert ties_seen > 0  # the simulation did produce ties on the way
    tasks = list(Task.objects.all())
    assert all(t.status == "complete" for t in tasks)
    assert all(t.extra_slots <= 2 and t.overlap == overlap + t.extra_slots for t in tasks)
    for row in ItemConsensus.objects.all():
        if row.zone == "tied":
            # Only a task at the cap keeps a tie, and it is never a hit or a miss.
            assert row.majority is None and row.task.extra_slots == 2
        else:
            assert row.majority == (1 if 2 * row.hit_votes > row.total_votes else 0)
            assert 2 * row.hit_votes != row.total_votes
    assert ItemConsensus.objects.filter(provenance="extra_expert").exists()
    assert Assignment.objects.filter(status="submitted").count() == sum(t.overlap for t in tasks)

    # The report sees each task's own panel, so every unit is complete; ties carry no verdict.
    m = material_load(project=project, version=version)
    d = derive(m)
    assert d["complete"].all()
    assert int(d["tied"].sum()) == ItemConsensus.objects.filter(zone="tied").count()
    assert (d["majority"][d["tied"]] == -1).all()


def test_tied_units_are_left_out_of_judge_agreement_and_scores_with_their_count():
    project = make_project_with_tasks(n_questions=2, items_per_question=2, overlap=2)
    project_settings_update(project=project, values={"tie_extra_experts": "off"}, changed_by=None,
                            now=timezone.now())
    a, b = _experts(project, 2)
    for _ in range(2):
        _submit(a, project, {1: 1, 2: 1})
        _submit(b, project, {1: 0, 2: 1})
    m = material_load(project=project, version=RubricVersion.objects.get())
    m.judge = np.ones(m.unit_task.size, np.int8)
    params = report_params(project)

    judge = judge_section(m, params)
    board = leaderboard_section(m, params)

    assert judge["tied_left_out"] == 2
    assert judge["overall"]["n"] == 2  # the two unanimous hits only
    assert judge["overall"]["agreement"] == 1.0
    assert board["tied_left_out"] == 2
    assert experts_section(m)["overall"]["tied"] == 2


def test_raising_the_overlap_keeps_the_extra_expert_on_top_of_the_new_panel():
    project = make_project_with_tasks(n_questions=1, items_per_question=1, overlap=2)
    a, b = _experts(project, 2)
    _submit(a, project, {1: 1})
    _submit(b, project, {1: 0})
    assert Task.objects.values_list("overlap", "extra_slots").get() == (3, 1)

    result = project_settings_update(project=project, values={"overlap": 3}, changed_by=None, now=timezone.now(),
                                     apply_to_existing=True)

    assert result.tasks_extended == 1
    assert Task.objects.values_list("overlap", "extra_slots", "status").get() == (4, 1, "open")
    again = project_settings_update(project=project, values={"overlap": 3}, changed_by=None, now=timezone.now(),
                                    apply_to_existing=True)
    assert again.tasks_extended == 0


def test_the_dashboard_and_items_page_show_tied_items_and_the_panel_size(client):
    project = make_project_with_tasks(n_questions=1, items_per_question=2, overlap=2, pm=PMFactory())
    project_settings_update(project=project, values={"tie_extra_experts": "off"}, changed_by=None,
                            now=timezone.now())
    a, b = _experts(project, 2)
    _submit(a, project, {1: 1, 2: 1})
    _submit(b, project, {1: 0, 2: 1})
    agreement_report_compute(project=project, judge_run=None, now=timezone.now())
    client.force_login(project.created_by)

    page = client.get(reverse("quality_dashboard", args=[project.pk]), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    items = client.get(reverse("quality_items", args=[project.pk]), {"zone": "tied"},
                       HTTP_ACCEPT_LANGUAGE="en").content.decode()

    assert "Units with the full panel (2 labels)" in page
    assert "three labels" not in page
    zones = client.get(reverse("quality_dashboard", args=[project.pk]), {"tab": "zones"},
                       HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert re.search(r"<dt>Tied</dt><dd><a [^>]*>1</a>", zones)
    assert items.count('<tr id="item-') == 1
    assert ">tie</span>" in items and ">Tied<" in items
