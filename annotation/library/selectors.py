"""Reads of the case library and the FAQ, scoped to a project member.

Members are the project's experts, its PMs and admins (`project_access_for_user`);
anyone else gets the same 404 for the project and for every case or entry in it. Experts
read published cases only; a case or entry of another project is "missing".
"""
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Prefetch, Q, QuerySet

from annotation.library.search import SearchQuery, search_query_parse, search_rank
from annotation.models import Case, CaseStatus, FaqEntry, Project, Question
from annotation.selectors import ProjectAccess, project_access_for_user
from core.errors import NotFound
from experts.models import ExpertProfile, Tier, User
from rubrics.models import Dimension, RubricItem

CASE_FIELDS = ("title", "problem", "disagreement", "discussion", "reading")
FAQ_FIELDS = ("question", "answer")
ANSWERING_TIERS = (Tier.GOLD, Tier.PLATINUM)
CASES_PER_ITEM = 5
MOST_READ = 5
SIMILAR_MAX = 3
# A typed question counts as similar to an answered one from this rank on: the exact
# phrase, or about 40% of its character pairs (annotation.library.search weights).
SIMILAR_MIN_RANK = 1.2


def library_access(user: User, project_id, *, manage: bool = False) -> ProjectAccess:
    """The project and the member's role; NotFound for anyone outside it (manage=True: PMs and admins only)."""
    return project_access_for_user(user, project_id, manage=manage)


def _dimensions_prefetch() -> Prefetch:
    return Prefetch("dimensions", queryset=Dimension.objects.order_by("sort_order", "code"))


# --- Cases -----------------------------------------------------------------------------

def case_list(access: ProjectAccess, *, query: SearchQuery | str = "", dimension: str = "", scene: str = "",
              status: str = "") -> QuerySet[Case]:
    """The cases `access.user` reads, matching the search and filters, best match first (newest without a query).

    PMs and admins see drafts too (`status` narrows to one status); experts only published cases.
    """
    cases = Case.objects.filter(project=access.project)
    if not access.manages:
        cases = cases.filter(status=CaseStatus.PUBLISHED)
    elif status in CaseStatus.values:
        cases = cases.filter(status=status)
    if dimension:
        cases = cases.filter(dimensions__code=dimension)
    if scene:
        # Scenes are a short JSON list; the text match works on both vendors and the exact check follows.
        cases = cases.filter(scenes__icontains=scene)
    parsed = query if isinstance(query, SearchQuery) else search_query_parse(query)
    cases = search_rank(cases, parsed, fields=CASE_FIELDS)
    return cases.prefetch_related(_dimensions_prefetch(), "items")


def case_get(access: ProjectAccess, case_id) -> Case:
    """A case of the project the member may read (a draft only for its PMs and admins), else NotFound."""
    cases = Case.objects.filter(project=access.project)
    if not access.manages:
        cases = cases.filter(status=CaseStatus.PUBLISHED)
    try:
        return cases.select_related("question", "created_by", "published_by").prefetch_related(
            _dimensions_prefetch(), "items").get(pk=int(case_id))
    except (Case.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such case.") from None


@dataclass(frozen=True)
class RelevantCase:
    """A published case beside one rubric item, and why it is there: "item", "question" or "dimension"."""

    case: Case
    reason: str
    same_scene: bool


def cases_for_items(*, project: Project, question: Question, items: Sequence[RubricItem]
                    ) -> dict[str, list[RelevantCase]]:
    """The published cases relevant to each of `items` (rubric items of one task), best first.

    First the cases that link the item itself, then other cases of the same question on
    the item's dimension (or on the question as a whole), then cases of the item's
    dimension, those of the question's scene first; among equals the most read. A case
    about another item of the question on another dimension stays beside that item only.
    A fixed number of queries however many items and cases (the cases, then their links
    and dimensions).
    """
    if not items:
        return {}
    keys = [i.item_key for i in items]
    dimension_ids = {i.dimension_id for i in items}
    cases = list(
        Case.objects.filter(project=project, status=CaseStatus.PUBLISHED)
        .filter(Q(items__item_key__in=keys) | Q(question=question) | Q(dimensions__in=dimension_ids))
        .distinct().order_by("-read_count", "-published_at", "-id")
        .only("id", "title", "reading", "outcome", "scenes", "read_count", "question_id", "published_at")
        .prefetch_related("items", Prefetch("dimensions", queryset=Dimension.objects.only("id")))
    )
    scenes = {s for s in (question.primary_scene, question.secondary_scene) if s}
    ranked: dict[str, list[tuple[int, int, RelevantCase]]] = defaultdict(list)
    for order, case in enumerate(cases):
        linked = {link.item_key for link in case.items.all()}
        case_dimensions = {d.pk for d in case.dimensions.all()}
        same_scene = bool(scenes & set(case.scenes or []))
        for item in items:
            general = not linked and not case_dimensions  # a case about the question as a whole
            if item.item_key in linked:
                tier, reason = 0, "item"
            elif case.question_id == question.pk and (item.dimension_id in case_dimensions or general):
                tier, reason = 1, "question"
            elif item.dimension_id in case_dimensions:
                tier, reason = (2 if same_scene else 3), "dimension"
            else:
                continue
            ranked[item.item_key].append((tier, order, RelevantCase(case=case, reason=reason, same_scene=same_scene)))
    return {key: [row[2] for row in sorted(rows, key=lambda r: (r[0], r[1]))] for key, rows in ranked.items()}


def cases_most_read(project: Project, *, limit: int = MOST_READ) -> list[Case]:
    """The project's published cases with the most readers (newest first among equals)."""
    return list(Case.objects.filter(project=project, status=CaseStatus.PUBLISHED)
                .order_by("-read_count", "-published_at", "-id")[:limit])


# --- FAQ -------------------------------------------------------------------------------

def faq_can_answer(access: ProjectAccess) -> bool:
    """PMs and admins of the project, and its gold and platinum experts, answer questions."""
    if access.manages:
        return True
    if not access.annotates:
        return False
    return ExpertProfile.objects.filter(user=access.user, tier__in=ANSWERING_TIERS).exists()


def faq_list(access: ProjectAccess, *, query: SearchQuery | str = "", dimension: str = "", scene: str = "",
             unanswered: bool = False) -> QuerySet[FaqEntry]:
    """Answered entries matching the search and filters, best match first; `unanswered`: the open questions
    instead, oldest first (for those who answer; everybody else sees only their own)."""
    entries = FaqEntry.objects.filter(project=access.project)
    if unanswered:
        entries = entries.filter(answered_at__isnull=True).order_by("asked_at", "id")
        if not faq_can_answer(access):
            entries = entries.filter(asked_by=access.user)
    else:
        entries = entries.filter(answered_at__isnull=False)
    if dimension:
        entries = entries.filter(dimensions__code=dimension)
    if scene:
        entries = entries.filter(scenes__icontains=scene)
    parsed = query if isinstance(query, SearchQuery) else search_query_parse(query)
    entries = search_rank(entries, parsed, fields=FAQ_FIELDS)
    return entries.select_related("asked_by", "answered_by").prefetch_related(_dimensions_prefetch())


def faq_mine(access: ProjectAccess) -> list[FaqEntry]:
    """The member's own questions, newest first, answered or not."""
    return list(FaqEntry.objects.filter(project=access.project, asked_by=access.user).order_by("-asked_at", "-id")[:20])


def faq_get(access: ProjectAccess, entry_id) -> FaqEntry:
    """An entry of the project: answered ones for every member; an open one for its asker and answerers."""
    entries = FaqEntry.objects.filter(project=access.project)
    if not faq_can_answer(access):
        entries = entries.filter(Q(answered_at__isnull=False) | Q(asked_by=access.user))
    try:
        return entries.select_related("asked_by", "answered_by", "source_question").prefetch_related(
            _dimensions_prefetch()).get(pk=int(entry_id))
    except (FaqEntry.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such question.") from None


def faq_similar(project: Project, text: str, *, limit: int = SIMILAR_MAX) -> list[FaqEntry]:
    """Answered entries close to `text` (a question being typed), best first; empty when none is close."""
    parsed = search_query_parse(text)
    if not parsed:
        return []
    entries = search_rank(FaqEntry.objects.filter(project=project, answered_at__isnull=False), parsed,
                          fields=FAQ_FIELDS)
    return list(entries.filter(search_rank__gte=SIMILAR_MIN_RANK)[:limit])
