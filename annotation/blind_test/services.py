"""Creating a blind-test sample, and the blind-test report read from the stored per-item agreement rows.

A PM draws a share of the project's questions (default 40%), stratified by scene and
difficulty, from a seed that is recorded (`sampling.draw`). From then on only the
sample's tasks are offered to experts: every other question is `judge_only`, which the
claim's eligible-task query filters out (`annotation.assignment.services`); their
tasks stay for the judge. A new sample replaces the active one.

The report takes the project's judge run (the default one unless chosen) and reads the
per-rubric-item rows of its newest agreement report (`AgreementItemStat`, strict
agreement on complete units, ties and ambiguous items left out, as everywhere) for the
sampled questions, gate items left out as in the headline of the agreement report. The
interval is `stats.cluster_wilson_interval` with each dialogue (question) as a cluster,
from per-question sums of the stored rows: no label is read.

Locks: the project row (`project_lock`) while the sample is drawn and the flags set.
"""
from __future__ import annotations

import math
import secrets
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.core.cache import cache
from django.db import transaction
from django.db.models import Count, Max, Q, Sum

from annotation.agreement import stats
from annotation.agreement.selectors import agreement_report_latest
from annotation.audit.services import audit_record
from annotation.blind_test.sampling import draw
from annotation.lock_objects import project_lock
from annotation.models import (
    AgreementItemStat,
    Assignment,
    AuditAction,
    BlindTest,
    BlindTestQuestion,
    JudgeRun,
    Project,
    Question,
    Task,
)
from annotation.models.blind_test import BLIND_SHARE, PASS_BAR_PCT
from annotation.projects.rules import project_check_writable
from core.errors import DomainError
from experts.models import User
from rubrics.models import Dimension

SEED_MAX = 2**53  # what a browser's number input and JSON carry exactly
ITEMS_SHOWN = 50
JUDGE_ONLY_CACHE_S = 60
ALPHA = 0.05


def seed_new() -> int:
    return secrets.randbelow(10**9)


def blind_test_active(*, project: Project) -> BlindTest | None:
    return BlindTest.objects.filter(project=project, is_active=True).first()


def blind_test_create(*, project: Project, share: float = BLIND_SHARE, seed: int | None = None,
                      pass_bar_pct: float = PASS_BAR_PCT, by: User | None, now: datetime) -> BlindTest:
    """Draw a new blind-test sample of `project`'s questions and make it the active one.

    `share` in (0, 1], `seed` a whole number from 0 to 2**53 (None: a fresh random seed,
    recorded), `pass_bar_pct` from 0 to 100; anything else raises DomainError and writes
    nothing (the form gives the user's-language message first). Every question outside
    the sample becomes judge-only, every question inside it expert-labelled. Audited.
    """
    if not (isinstance(share, (int, float)) and math.isfinite(share) and 0 < share <= 1):
        raise DomainError("The share of questions must be more than 0 and at most 1.")
    if seed is None:
        seed = seed_new()
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise DomainError(f"The seed must be a whole number from 0 to {SEED_MAX}.")
    if not (isinstance(pass_bar_pct, (int, float)) and math.isfinite(pass_bar_pct) and 0 <= pass_bar_pct <= 100):
        raise DomainError("The pass bar must be a percentage from 0 to 100.")
    project_check_writable(project)
    with transaction.atomic():
        project_lock(project.pk)
        questions = list(Question.objects.filter(project=project).values_list("pk", "external_id", "primary_scene",
                                                                               "difficulty"))
        if not questions:
            raise DomainError("The project has no questions to sample yet.")
        chosen = set(draw([(ext, scene, diff) for _, ext, scene, diff in questions], share=share, seed=seed))
        BlindTest.objects.filter(project=project, is_active=True).update(is_active=False)
        number = (BlindTest.objects.filter(project=project).aggregate(n=Max("number"))["n"] or 0) + 1
        test = BlindTest.objects.create(project=project, number=number, share=share, seed=seed,
                                        pass_bar_pct=pass_bar_pct, questions_total=len(questions),
                                        questions_sampled=len(chosen), created_by=by, created_at=now)
        BlindTestQuestion.objects.bulk_create(
            BlindTestQuestion(blind_test=test, question_id=pk, scene=scene or "", difficulty=diff)
            for pk, ext, scene, diff in questions if ext in chosen)
        sampled_ids = [pk for pk, ext, _, _ in questions if ext in chosen]
        Question.objects.filter(project=project).exclude(pk__in=sampled_ids).update(judge_only=True)
        Question.objects.filter(project=project, pk__in=sampled_ids).update(judge_only=False)
        transaction.on_commit(lambda: cache.delete(_judge_only_key(project.pk)))
        audit_record(actor=by, action=AuditAction.BLIND_TEST_CREATE, project_id=project.pk, objects=[test],
                     now=now, details={"number": number, "share": share, "seed": seed, "pass_bar_pct": pass_bar_pct,
                                       "questions_total": len(questions), "questions_sampled": len(chosen)})
    return test


def blind_test_task_counts(*, project: Project) -> dict[str, int]:
    """Regular tasks of the project split into those offered to experts and the judge-only ones."""
    counts = (Task.objects.filter(project=project, is_golden=False).exclude(status=Task.Status.SUPERSEDED)
              .aggregate(total=Count("pk"), judge_only=Count("pk", filter=Q(response__question__judge_only=True))))
    return {"judge_only": counts["judge_only"], "experts": counts["total"] - counts["judge_only"]}


def _judge_only_key(project_id: int) -> str:
    return f"blind-test-judge-only:{project_id}"


def blind_test_open_judge_only(*, project: Project) -> int:
    """Open regular tasks no expert is offered (their question is outside the active sample); 0 without a test.

    Only a blind test marks questions judge-only, and a new one resets every flag. The count
    joins every task to its question (76 ms at 100,000 tasks, 60,000 of them judge-only), so
    the board reads it from the cache for a minute; drawing a sample forgets it.
    """
    key = _judge_only_key(project.pk)
    cached = cache.get(key)
    if cached is None:
        cached = Task.objects.filter(project=project, is_golden=False, status=Task.Status.OPEN,
                                     response__question__judge_only=True).count()
        cache.set(key, cached, JUDGE_ONLY_CACHE_S)
    return int(cached)


@dataclass
class Slice:
    key: str
    name: str
    units: int
    agree: int
    questions: int
    agreement: float | None
    ci: tuple[float, float]


@dataclass
class BlindReport:
    test: BlindTest
    run: JudgeRun | None
    computed_at: datetime | None
    bar: float
    overall: Slice | None
    passed: bool | None
    questions_sampled: int
    questions_scored: int
    experts: int
    per_item: int
    by_dimension: list[Slice] = field(default_factory=list)
    dimensions_below: list[Slice] = field(default_factory=list)
    items_below: list[AgreementItemStat] = field(default_factory=list)
    items_below_total: int = 0
    # Which expert labels the report read: "first" (blind, as submitted) or "revised" (annotation.reveal).
    labels_used: str = "first"


def _slice(key: str, name: str, per_question: dict[str, list[int]]) -> Slice:
    agree = sum(a for a, _ in per_question.values())
    units = sum(n for _, n in per_question.values())
    successes = [a for a, _ in per_question.values()]
    totals = [n for _, n in per_question.values()]
    ci = stats.cluster_wilson_interval(successes, totals, ALPHA) if units else (math.nan, math.nan)
    return Slice(key=key, name=name, units=units, agree=agree, questions=sum(1 for n in totals if n),
                 agreement=agree / units if units else None, ci=ci)


def blind_test_report(*, test: BlindTest, run: JudgeRun | None, english: bool) -> BlindReport:
    """The blind test's figures for `run` (see the module docstring); a fixed handful of queries."""
    project = test.project
    bar = test.pass_bar_pct / 100
    empty = BlindReport(test=test, run=run, computed_at=None, bar=bar, overall=None, passed=None,
                        questions_sampled=test.questions_sampled, questions_scored=0, experts=0,
                        per_item=project.overlap)
    if run is None:
        return empty
    report = agreement_report_latest(project, judge_run_id=run.pk)
    if report is None:
        return empty
    refs = list(BlindTestQuestion.objects.filter(blind_test=test).values_list("question__external_id", flat=True))
    gates = set(Dimension.objects.filter(is_gate=True).values_list("code", flat=True))
    rows = (AgreementItemStat.objects.filter(report=report, question_ref__in=refs).exclude(dimension_code__in=gates))
    overall: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    per_dim: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for dim, ref, agree, units in (rows.values("dimension_code", "question_ref")
                                   .annotate(a=Sum("agree"), n=Sum("units")).order_by()
                                   .values_list("dimension_code", "question_ref", "a", "n")):
        overall[ref][0] += agree
        overall[ref][1] += units
        per_dim[dim][ref][0] += agree
        per_dim[dim][ref][1] += units
    names = {code: (en if english else zh) for code, zh, en in
             Dimension.objects.filter(code__in=per_dim).values_list("code", "name_zh", "name_en")}
    order = {code: i for i, code in enumerate(Dimension.objects.order_by("sort_order", "code")
                                             .values_list("code", flat=True))}
    head = _slice("overall", "", overall)
    codes = sorted(per_dim, key=lambda c: order.get(c, len(order)))
    by_dim = [_slice(code, names.get(code, code), per_dim[code]) for code in codes]
    below_items = rows.filter(strict__lt=bar).select_related("rubric_item__dimension").order_by("strict", "-units",
                                                                                     "question_ref", "position")
    experts = (Assignment.objects.filter(task__project=project, task__is_golden=False,
                                         task__rubric_version_id=run.rubric_version_id,
                                         task__response__question__external_id__in=refs,
                                         status=Assignment.Status.SUBMITTED)
               .values("expert_id").distinct().count())
    passed = None if head.agreement is None else head.agreement >= bar - 1e-9
    return BlindReport(
        test=test, run=run, computed_at=report.computed_at, bar=bar, overall=head if head.units else None,
        passed=passed, questions_sampled=test.questions_sampled, questions_scored=head.questions, experts=experts,
        per_item=project.overlap, by_dimension=by_dim,
        dimensions_below=[s for s in by_dim if s.agreement is not None and s.agreement < bar - 1e-9],
        items_below=list(below_items[:ITEMS_SHOWN]), items_below_total=below_items.count(),
        labels_used=(report.payload or {}).get("labels_used", "first"))
