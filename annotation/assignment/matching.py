"""Matching: weighting the random draw toward experts whose portrait is strong in a task's dimensions.

Rubrica assigns by pull: an expert asks for work and the ring draw picks a task for
them. Matching works inside that draw and never outside the assignment rules:

1. Eligibility is decided first and is all-or-nothing. An ineligible expert (not a
   member, paused, not calibrated, at their lease limit) gets no task at all, and a
   task the expert may not take (wrong tier for its difficulty, a golden task, one
   they held before, another rubric version, not open) is never a candidate. So an
   ineligible pair has probability zero.
2. Among eligible tasks the draw takes up to K = 3 candidates, each the first open
   task past an independent uniformly random point of the task ring, and picks one
   with probability weight / (sum of the candidates' weights), where

       weight(expert, task) = 1 + BONUS * strength(expert, task),    BONUS = 3
       strength(expert, task) = mean over the task's non-gate dimensions d of s(d)
       s(d) = SPECIALTY_SHARE * [d is one of the expert's specialties]
              + (1 - SPECIALTY_SHARE) * accuracy_term(d),             SPECIALTY_SHARE = 0.5
       accuracy_term(d) = clamp((golden accuracy on d - 50%) / 50%, 0, 1)
                          when the expert answered at least MIN_GOLDEN_ITEMS golden
                          items in d, else 0

   so strength is in [0, 1] and weight in [1, 1 + BONUS] = [1, 4]. A specialty
   reflects credentials (a licensed counsellor gets the morality and emotion
   abilities as specialties); golden accuracy is measured.
3. Bounds. Every candidate keeps a chance of at least 1 / (1 + (K - 1)(1 + BONUS)) = 1/9
   of being picked, and every open eligible task is a candidate with positive
   probability (a random ring point falls before it), so every eligible (expert,
   task) pair keeps a non-zero chance. A strong expert's share of the matching
   tasks grows by at most the factor 1 + BONUS; the task still goes to `overlap`
   distinct experts, and each expert still gets it at most once (database rules).
   An expert with no strength anywhere (no specialties, no golden evidence) draws a
   single candidate: the plain random draw.

The task ring above is the ring of the tasks the project's fill order offers first
(`annotation.assignment.services`: by default the open tasks someone already started,
while any is left for the expert); the formula and the bounds hold within it.
"""
import random
from collections.abc import Sequence

from django.db.models import Exists, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce

from annotation.models import GoldenTally, Task
from experts.models import ExpertProfile, User
from rubrics.models import Dimension, RubricItem

CANDIDATES = 3
BONUS = 3.0
SPECIALTY_SHARE = 0.5
MIN_GOLDEN_ITEMS = 10


def expert_strengths(profile: ExpertProfile, expert: User) -> dict[int, float]:
    """{dimension id: s(d)} for the dimensions where the expert (`profile` is theirs) has any strength (s > 0).

    One query, whatever the expert's history: specialties and the stored golden tally
    (`annotation.quality.golden_tally`, summed over projects) per dimension.
    """
    tally = (GoldenTally.objects.filter(expert_id=expert.pk, dimension_id=OuterRef("pk")).order_by()
             .values("dimension_id"))
    specialty = ExpertProfile.specialties.through.objects.filter(expertprofile_id=profile.pk,
                                                                 dimension_id=OuterRef("pk"))
    rows = (Dimension.objects.annotate(
        special=Exists(specialty),
        total=Coalesce(Subquery(tally.annotate(n=Sum("total")).values("n")[:1]), 0),
        correct=Coalesce(Subquery(tally.annotate(n=Sum("correct")).values("n")[:1]), 0))
        .filter(Q(special=True) | Q(total__gte=MIN_GOLDEN_ITEMS))
        .values_list("pk", "special", "total", "correct"))
    return strengths_from_rows(rows)


def strengths_from_rows(rows) -> dict[int, float]:
    """{dimension id: s(d)} from (dimension id, specialty?, golden items, right) rows, those with s > 0."""
    strengths: dict[int, float] = {}
    for dim_id, special, total, correct in rows:
        strength = SPECIALTY_SHARE if special else 0.0
        if total >= MIN_GOLDEN_ITEMS:
            term = min(1.0, max(0.0, (correct / total - 0.5) / 0.5))
            strength += (1 - SPECIALTY_SHARE) * term
        if strength > 0:
            strengths[dim_id] = strength
    return strengths


def strengths_sql(expert_id: int) -> tuple[str, list[object]]:
    """The rows of `expert_strengths` as one JSON text, a subquery for the claim's first query
    (PostgreSQL): [[dimension id, specialty?, golden items, right], ...]."""
    specialty = ExpertProfile.specialties.through._meta.db_table
    sql = f"""(SELECT COALESCE(json_agg(json_build_array(s.id, s.special, s.total, s.correct)), '[]')::text FROM (
        SELECT d.id,
            EXISTS (SELECT 1 FROM {specialty} sp JOIN {ExpertProfile._meta.db_table} p ON p.id = sp.expertprofile_id
                    WHERE p.user_id = %s AND sp.dimension_id = d.id) AS special,
            COALESCE((SELECT sum(g.total) FROM {GoldenTally._meta.db_table} g
                      WHERE g.expert_id = %s AND g.dimension_id = d.id), 0) AS total,
            COALESCE((SELECT sum(g.correct) FROM {GoldenTally._meta.db_table} g
                      WHERE g.expert_id = %s AND g.dimension_id = d.id), 0) AS correct
        FROM {Dimension._meta.db_table} d) s
    WHERE s.special OR s.total >= %s)"""
    return sql, [expert_id, expert_id, expert_id, MIN_GOLDEN_ITEMS]


def task_dimensions(tasks: Sequence[Task]) -> dict[int, set[int]]:
    """{task id: its non-gate dimension ids}, from the items of each task's question and version."""
    wanted = {(t.rubric_version_id, t.response.question.external_id): t.pk for t in tasks}
    rows = (RubricItem.objects.filter(version_id__in={v for v, _q in wanted},
                                      question_ref__in={q for _v, q in wanted}, dimension__is_gate=False)
            .values_list("version_id", "question_ref", "dimension_id"))
    dims: dict[int, set[int]] = {t.pk: set() for t in tasks}
    for version_id, question_ref, dim_id in rows:
        task_id = wanted.get((version_id, question_ref))
        if task_id is not None:
            dims[task_id].add(dim_id)
    return dims


def weight(strengths: dict[int, float], dimensions: set[int]) -> float:
    """1 + BONUS * strength, strength being the mean of s(d) over the task's dimensions (0 without any)."""
    if not dimensions:
        return 1.0
    strength = sum(strengths.get(d, 0.0) for d in dimensions) / len(dimensions)
    return 1.0 + BONUS * min(1.0, strength)


def candidate_pick(candidates: Sequence[Task], strengths: dict[int, float], rng: random.Random,
                   dims: dict[int, set[int]] | None = None) -> Task:
    """One of `candidates`, with probability proportional to its weight for the expert.

    `dims` ({task id: its non-gate dimension ids}) when the draw read them already."""
    if len(candidates) == 1:
        return candidates[0]
    dims = dims if dims is not None else task_dimensions(candidates)
    weights = [weight(strengths, dims[t.pk]) for t in candidates]
    return rng.choices(list(candidates), weights=weights, k=1)[0]
