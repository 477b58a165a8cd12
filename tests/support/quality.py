"""Builders for expert-quality tests: a project with a golden set, calibrated experts, golden files."""
import json
import random

from django.utils import timezone

from annotation.calibration.services import calibration_answer, calibration_start
from annotation.exchange.golden import golden_import
from annotation.models import CalibrationAttempt, GoldenReference, Project, Task
from annotation.selectors import rubric_items_for_task
from annotation.services import project_add_member
from experts.models import User
from tests.factories import ExpertFactory, PMFactory, make_project_with_tasks


def reference_bits(question_ref: str, n_items: int) -> list[int]:
    """A fixed, mixed 0/1 pattern per question, so that "all hits" is not the right answer."""
    seed = sum(ord(c) for c in question_ref)
    return [(seed + i) % 2 for i in range(n_items)]


def golden_file(project: Project, tasks: list[Task], *, rationale: bool = True) -> bytes:
    rows = []
    for task in tasks:
        question = task.response.question
        n = len(rubric_items_for_task(task))
        row = {"question_id": question.external_id, "model": task.response.model_name,
               "labels": reference_bits(question.external_id, n)}
        if rationale:
            row["rationale"] = [f"reason {i + 1} for {question.external_id}" for i in range(n)]
        rows.append(json.dumps(row, ensure_ascii=False))
    return ("\n".join(rows) + "\n").encode()


def make_golden_project(*, golden: int = 12, regular: int = 6, items: int = 3, overlap: int = 3,
                        pm: User | None = None, **settings) -> Project:
    """A published project whose first `golden` questions are golden (one response each), with the rest regular."""
    pm = pm or PMFactory()
    project = make_project_with_tasks(n_questions=golden + regular, items_per_question=items, overlap=overlap,
                                      pm=pm)
    if settings:
        Project.objects.filter(pk=project.pk).update(**settings)
        project.refresh_from_db()
    tasks = list(Task.objects.filter(project=project).select_related("response__question")
                 .order_by("response__question__external_id"))
    chosen = sorted(tasks, key=lambda t: int(t.response.question.external_id[1:]))[:golden]
    if chosen:
        golden_import(project=project, data=golden_file(project, chosen), now=timezone.now())
    return project


def member(project: Project, **profile) -> User:
    expert = ExpertFactory()
    project_add_member(project=project, user=expert)
    if profile:
        type(expert.expert_profile).objects.filter(user=expert).update(**profile)
        expert.refresh_from_db()
    return expert


def answer_attempt(attempt: CalibrationAttempt, *, wrong_items: int = 0, now=None) -> CalibrationAttempt:
    """Answer every task of the attempt with the reference, except the first `wrong_items` items overall."""
    now = now or timezone.now()
    to_flip = wrong_items
    for ct in attempt.tasks.order_by("position"):
        refs = dict(GoldenReference.objects.filter(task=ct.task).values_list("rubric_item__item_key", "value"))
        labels = {}
        for key in sorted(refs):
            value = refs[key]
            if to_flip > 0:
                value, to_flip = 1 - value, to_flip - 1
            labels[key] = value
        calibration_answer(expert=attempt.expert, attempt_id=attempt.pk, position=ct.position, labels=labels,
                           now=now)
    attempt.refresh_from_db()
    return attempt


def calibrated(project: Project, expert: User | None = None, **profile) -> User:
    """A member of `project` who passed calibration with every item right."""
    expert = expert or member(project, **profile)
    attempt = calibration_start(project=project, expert=expert, now=timezone.now(), rng=random.Random(7))
    answer_attempt(attempt)
    return expert
