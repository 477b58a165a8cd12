"""The difference between two rubric versions, matched by stable `item_key`."""
from dataclasses import dataclass, field

from rubrics.guidelines import guidelines_line_diff
from rubrics.models import RubricItem, RubricVersion

# What makes an item "the same criterion": its wording, its score, its dimension (and tags),
# as {name shown in the diff: attribute compared}.
COMPARED_FIELDS = {"content": "content", "score": "score", "dimension": "dimension_id", "tags": "tags"}


@dataclass(frozen=True)
class ItemChange:
    before: RubricItem
    after: RubricItem
    fields: tuple[str, ...]


@dataclass(frozen=True)
class RubricDiff:
    added: list[RubricItem] = field(default_factory=list)
    removed: list[RubricItem] = field(default_factory=list)
    changed: list[ItemChange] = field(default_factory=list)
    # Question refs that have items in the older version (the questions experts were calibrated on).
    old_questions: frozenset[str] = frozenset()
    # The guidelines' line diff, [(mark, line)] with mark "+", "-", " " or "…"; empty when unchanged.
    guidelines: list[tuple[str, str]] = field(default_factory=list)

    @property
    def guidelines_changed(self) -> bool:
        return bool(self.guidelines)

    @property
    def is_empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.guidelines)

    @property
    def touched_questions(self) -> set[str]:
        return ({i.question_ref for i in self.added} | {i.question_ref for i in self.removed}
                | {c.after.question_ref for c in self.changed})

    @property
    def standard_questions(self) -> set[str]:
        """The questions already judged whose criteria changed (see `changes_standard`)."""
        return ({i.question_ref for i in self.removed} | {c.after.question_ref for c in self.changed}
                | {i.question_ref for i in self.added if i.question_ref in self.old_questions})

    @property
    def changes_standard(self) -> bool:
        """Whether a criterion experts already judge changed: an edit, a removal, or an item
        added to a question that had items. New questions alone (an import) leave the standard as is,
        and so do the guidelines alone: they explain the criteria, the criteria stay the same."""
        return bool(self.removed or self.changed
                    or any(i.question_ref in self.old_questions for i in self.added))


def rubric_version_diff(*, old: RubricVersion | None, new: RubricVersion) -> RubricDiff:
    """Items added, removed and changed from `old` to `new` (everything is added when `old` is None),
    and the guidelines' line diff."""
    new_items = {i.item_key: i for i in RubricItem.objects.filter(version=new).select_related("dimension")}
    guidelines = _guidelines_diff(old.guidelines if old is not None else "", new.guidelines)
    if old is None:
        return RubricDiff(added=sorted(new_items.values(), key=_order), guidelines=guidelines)
    old_items = {i.item_key: i for i in RubricItem.objects.filter(version=old).select_related("dimension")}
    added = [new_items[k] for k in new_items.keys() - old_items.keys()]
    removed = [old_items[k] for k in old_items.keys() - new_items.keys()]
    changed = []
    for key in new_items.keys() & old_items.keys():
        before, after = old_items[key], new_items[key]
        fields = tuple(name for name, attr in COMPARED_FIELDS.items() if getattr(before, attr) != getattr(after, attr))
        if fields:
            changed.append(ItemChange(before=before, after=after, fields=fields))
    return RubricDiff(added=sorted(added, key=_order), removed=sorted(removed, key=_order),
                      changed=sorted(changed, key=lambda c: _order(c.after)),
                      old_questions=frozenset(i.question_ref for i in old_items.values()), guidelines=guidelines)


def _guidelines_diff(old: str, new: str) -> list[tuple[str, str]]:
    return guidelines_line_diff(old, new) if old.strip() != new.strip() else []


def _order(item: RubricItem) -> tuple[str, int]:
    return item.question_ref, item.position
