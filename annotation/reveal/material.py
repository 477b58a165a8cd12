"""The revised label cells of an agreement report's material (annotation.agreement.report).

Revisions are few (at most one per label an expert saw differ from the judge), so they are read
with one plain query and placed into the material's label matrix by (task, item, panel seat).
When the project's consensus reads revised labels, the matrix takes them; either way the cells
are kept on the material so the report can show agreement before and after the reveal.
"""
from __future__ import annotations

import numpy as np

from annotation.agreement.material import Material, Revisions
from annotation.models import Assignment, ConsensusLabels, LabelRevision, Project
from rubrics.models import RubricVersion


def revisions_apply(material: Material, *, project: Project, version: RubricVersion | None) -> None:
    """Set `material.labels_used` to the project's choice, `material.revisions` to the revised cells, and
    put the revised values into `material.labels` when the project counts revised labels."""
    material.labels_used = str(project.consensus_labels)
    if version is None or material.unit_task.size == 0:
        return
    rows = list(LabelRevision.objects.filter(
        label__task__project=project, label__task__rubric_version=version, label__task__is_golden=False,
        label__assignment__status=Assignment.Status.SUBMITTED,
    ).values_list("label__task_id", "label__rubric_item_id", "label__assignment__slot", "label__value", "value",
                  "judge_value"))
    if not rows:
        return
    task_ids, item_ids, slots, firsts, revised, shown = (np.asarray(column, np.int64) for column in zip(*rows))
    n_items = max(1, material.item_id.size)
    t_pos = np.searchsorted(material.task_id, task_ids)
    i_pos = np.searchsorted(material.item_id, item_ids)
    known = ((t_pos < material.task_id.size) & (i_pos < material.item_id.size) & (slots >= 1)
             & (slots <= material.n_slots))
    known[known] &= (material.task_id[t_pos[known]] == task_ids[known]) & (material.item_id[i_pos[known]]
                                                                          == item_ids[known])
    unit_keys = material.unit_task * n_items + material.unit_item  # ascending by construction
    keys = t_pos[known] * n_items + i_pos[known]
    u_pos = np.minimum(np.searchsorted(unit_keys, keys), unit_keys.size - 1)
    found = unit_keys[u_pos] == keys
    unit, slot = u_pos[found], slots[known][found] - 1
    material.revisions = Revisions(unit=unit.astype(np.int64), slot=slot.astype(np.int64),
                                   first=firsts[known][found].astype(np.int8),
                                   revised=revised[known][found].astype(np.int8),
                                   judge_shown=shown[known][found].astype(np.int8))
    if project.consensus_labels == ConsensusLabels.REVISED:
        material.labels[unit, slot] = material.revisions.revised
        material.derived.clear()
