"""The golden set across rubric versions: which tasks are golden, and carrying references to a new version.

A golden task serves every expert of the project (calibration and silent control
tasks), so it gets `GOLDEN_OVERLAP` slots instead of the project's overlap; its
consensus is never written and it never counts as regular work. The import of
reference labels lives with the other imports (`annotation.exchange.golden`).
"""
from datetime import datetime

from annotation.models import GoldenReference, Project, Task
from rubrics.models import RubricItem, RubricVersion

# Slots of a golden task: enough for every expert of a project to meet it once.
GOLDEN_OVERLAP = 10_000


def task_mark_golden(*, task_ids: list[int]) -> None:
    """Make tasks golden: out of the regular pool, open to every expert of the project once."""
    Task.objects.filter(pk__in=task_ids).update(is_golden=True, overlap=GOLDEN_OVERLAP, status=Task.Status.OPEN)


def golden_carry_forward(*, project: Project, previous: RubricVersion, version: RubricVersion,
                         unchanged_questions: frozenset[str] | set[str], now: datetime) -> int:
    """Carry the golden set of `previous` to the newly published `version`.

    Each golden response gets its task on the new version marked golden. References
    are copied only for questions whose items did not change (same keys, content,
    score and dimension): a changed standard needs a fresh reference from the PM, and
    until then that task is not usable for calibration. Returns the references copied.
    """
    golden = list(Task.objects.filter(project=project, rubric_version=previous, is_golden=True)
                  .select_related("response__question"))
    if not golden:
        return 0
    new_tasks = {t.response_id: t for t in Task.objects.filter(
        project=project, rubric_version=version, response_id__in=[t.response_id for t in golden])}
    # These tasks were created by this publish, so nobody has worked on them yet.
    task_mark_golden(task_ids=[t.pk for t in new_tasks.values()])
    new_items = {i.item_key: i
                 for i in RubricItem.objects.filter(version=version, question_ref__in=unchanged_questions)}
    carried = []
    old_refs = (GoldenReference.objects.filter(task__in=golden,
                                               task__response__question__external_id__in=unchanged_questions)
                .select_related("rubric_item"))
    by_task = {t.pk: t for t in golden}
    for ref in old_refs:
        new_task = new_tasks.get(by_task[ref.task_id].response_id)
        new_item = new_items.get(ref.rubric_item.item_key)
        if new_task is not None and new_item is not None:
            carried.append(GoldenReference(task=new_task, rubric_item=new_item, value=ref.value,
                                           rationale=ref.rationale, created_at=now))
    GoldenReference.objects.bulk_create(carried, ignore_conflicts=True)
    return len(carried)
