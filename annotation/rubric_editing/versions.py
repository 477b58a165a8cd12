"""Reads over published rubric versions: the changelog, and two versions compared on their shared items."""
from collections import Counter
from dataclasses import dataclass, field

from annotation.models import ItemConsensus, Project
from annotation.rubric_editing.diff import COMPARED_FIELDS, RubricDiff, rubric_version_diff
from core.errors import NotFound
from rubrics.models import RubricItem, RubricVersion


@dataclass(frozen=True)
class ChangelogEntry:
    version: RubricVersion
    # Against the version published before it; None for the first version.
    diff: RubricDiff | None


def rubric_changelog(project: Project) -> list[ChangelogEntry]:
    """Every published version of the project's rubric, newest first, with author, reason and diff."""
    versions = list(RubricVersion.objects.filter(rubric_id=project.rubric_id, status=RubricVersion.Status.PUBLISHED)
                    .select_related("published_by").order_by("number"))
    entries = []
    previous = None
    for version in versions:
        entries.append(ChangelogEntry(version=version,
                                      diff=rubric_version_diff(old=previous, new=version) if previous else None))
        previous = version
    return entries[::-1]


def rubric_published_version_get(*, project: Project, number) -> RubricVersion:
    """A published version of the project's rubric by number, or NotFound (drafts too)."""
    try:
        return RubricVersion.objects.get(rubric_id=project.rubric_id, number=int(number),
                                         status=RubricVersion.Status.PUBLISHED)
    except (RubricVersion.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such rubric version.") from None


@dataclass(frozen=True)
class ItemFigures:
    tasks: int = 0
    hits: int = 0
    zones: dict[str, int] = field(default_factory=dict)

    @property
    def hit_rate(self) -> float | None:
        decided = self.tasks - self.zones.get("tied", 0)
        return self.hits / decided if decided else None


@dataclass(frozen=True)
class SharedItem:
    item_key: str
    question_id: str
    content_a: str
    content_b: str
    changed: tuple[str, ...]
    a: ItemFigures
    b: ItemFigures


def _figures(version: RubricVersion, keys: set[str]) -> dict[str, ItemFigures]:
    rows = (ItemConsensus.objects.filter(rubric_item__version=version, rubric_item__item_key__in=keys)
            .values_list("rubric_item__item_key", "majority", "zone"))
    tasks: Counter[str] = Counter()
    hits: Counter[str] = Counter()
    zones: dict[str, Counter[str]] = {}
    for key, majority, zone in rows:
        tasks[key] += 1
        hits[key] += 1 if majority == 1 and zone != "tied" else 0
        zones.setdefault(key, Counter())[zone] += 1
    return {k: ItemFigures(tasks=tasks[k], hits=hits[k], zones=dict(zones.get(k, {}))) for k in keys}


def rubric_versions_compare(*, a: RubricVersion, b: RubricVersion) -> list[SharedItem]:
    """Per item key present in both versions: its consensus figures under each.

    Work carried over from `a` to `b` counts under `b` only (its tasks moved), so an unchanged
    item shows under `a` only the work that stayed there: tasks of its question superseded or
    completed before one of its sibling items changed.
    """
    items_a = {i.item_key: i for i in RubricItem.objects.filter(version=a)}
    items_b = {i.item_key: i for i in RubricItem.objects.filter(version=b)}
    shared = items_a.keys() & items_b.keys()
    fig_a, fig_b = _figures(a, shared), _figures(b, shared)
    rows = []
    for key in sorted(shared, key=lambda k: (items_b[k].question_ref, items_b[k].position)):
        before, after = items_a[key], items_b[key]
        changed = tuple(name for name, attr in COMPARED_FIELDS.items() if getattr(before, attr) != getattr(after, attr))
        rows.append(SharedItem(item_key=key, question_id=after.question_ref, content_a=before.content,
                               content_b=after.content, changed=changed, a=fig_a[key], b=fig_b[key]))
    return rows
