"""Silent control tasks: golden tasks leased as regular work, scored at submission.

The pause rule: when an expert's item accuracy over their last `project.control_window`
control tasks in a project falls below `project.control_pause_below_pct`, their expert
profile is paused (no new leases anywhere) and the project's PMs are notified. Only
control tasks scored since the profile's last status change count, so a PM who resumes
an expert gives them a fresh window instead of an immediate second pause.

Locks inside a submission: task, assignment, then the expert's profile row (the order
is `annotation.lock_objects`).
"""
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.urls import reverse

from annotation.audit.services import audit_record
from annotation.lock_objects import expert_profile_lock
from annotation.models import Assignment, AuditAction, ControlResult, GoldenReference, Project, Task
from annotation.quality.golden_tally import golden_tally_add
from annotation.selectors import project_expert_get, project_managers
from core.errors import NotFound
from experts.models import ExpertProfile, User
from experts.notifications import notification_send

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ControlAccuracy:
    tasks: int
    items: int
    correct: int

    @property
    def pct(self) -> float | None:
        return 100 * self.correct / self.items if self.items else None


def control_accuracy_for_experts(*, project: Project, experts: Iterable[User], window: int,
                                 since: datetime | None = None) -> dict[int, ControlAccuracy]:
    """Item accuracy over each expert's last `window` control tasks in `project` (scored after `since`),
    by user id, in one query: the experts page reads every expert at once."""
    experts = list(experts)
    results = ControlResult.objects.filter(project=project, expert__in=experts)
    if since is not None:
        results = results.filter(scored_at__gte=since)
    newest = (results.annotate(rank=Window(RowNumber(), partition_by=[F("expert_id")],
                                           order_by=[F("scored_at").desc(), F("id").desc()]))
              .filter(rank__lte=window).values_list("expert_id", "items_correct", "items_total"))
    rows: dict[int, list[tuple[int, int]]] = {e.pk: [] for e in experts}
    for expert_id, correct, total in newest:
        rows[expert_id].append((correct, total))
    return {expert_id: ControlAccuracy(tasks=len(r), items=sum(t for _c, t in r), correct=sum(c for c, _t in r))
            for expert_id, r in rows.items()}


def control_accuracy(*, project: Project, expert: User, window: int,
                     since: datetime | None = None) -> ControlAccuracy:
    """Item accuracy over the expert's last `window` control tasks in `project` (scored after `since`)."""
    return control_accuracy_for_experts(project=project, experts=[expert], window=window, since=since)[expert.pk]


def control_record(*, assignment: Assignment, task: Task, values: dict[int, int], now: datetime) -> ControlResult:
    """Score a submitted control task ({rubric item id: 0|1}) and apply the pause rule.

    Runs inside the submission's transaction, so the score and any pause commit with the labels.
    """
    references = {item_id: (value, dim_id) for item_id, value, dim_id in GoldenReference.objects.filter(task=task)
                  .values_list("rubric_item_id", "value", "rubric_item__dimension_id")}
    scored = [(value, *references[item_id]) for item_id, value in values.items() if item_id in references]
    result = ControlResult.objects.create(
        assignment=assignment, expert_id=assignment.expert_id, project_id=task.project_id,
        items_total=len(scored), items_correct=sum(1 for v, r, _d in scored if v == r), scored_at=now)
    _pause_if_below(project=task.project, expert_id=assignment.expert_id, now=now)
    by_dimension: dict[int, tuple[int, int]] = {}
    for value, reference, dim_id in scored:
        total, correct = by_dimension.get(dim_id, (0, 0))
        by_dimension[dim_id] = (total + 1, correct + int(value == reference))
    # After the profile lock (the tally rows come last in the lock order).
    golden_tally_add(expert_id=assignment.expert_id, project_id=task.project_id, counts=by_dimension)
    return result


def _pause_if_below(*, project: Project, expert_id: int, now: datetime) -> None:
    profile = expert_profile_lock(expert_id)
    if profile is None or not profile.is_active:
        return
    accuracy = control_accuracy(project=project, expert=profile.user, window=project.control_window,
                                since=profile.status_changed_at)
    if accuracy.tasks < project.control_window or accuracy.pct is None:
        return
    if accuracy.pct >= project.control_pause_below_pct:
        return
    params = {"expert": profile.pseudonym, "project": project.name, "accuracy": f"{accuracy.pct:.0f}",
              "window": project.control_window, "threshold": project.control_pause_below_pct}
    profile.status = ExpertProfile.Status.PAUSED
    profile.status_reason = (f"Paused automatically in project {project.pk}: control-task accuracy "
                             f"{accuracy.pct:.0f}% over the last {accuracy.tasks} control tasks is below "
                             f"{project.control_pause_below_pct}%.")
    profile.status_changed_at = now
    profile.save(update_fields=["status", "status_reason", "status_changed_at"])
    notification_send(users=project_managers(project), kind="expert_paused", params=params, now=now,
                      link=reverse("quality_expert", args=[project.pk, profile.user_id]))
    notification_send(users=[profile.user], kind="account_paused", params={"project": project.name}, now=now)
    logger.info("expert paused by control accuracy", extra={"expert_id": profile.user_id, "project_id": project.pk})


@transaction.atomic
def expert_resume(*, project: Project, expert_id, now: datetime, by: User, audited: bool = True) -> ExpertProfile:
    """A PM resumes a paused expert of their project; the control window starts afresh.

    One audit entry when the expert was paused (unless `audited` is False: a batch writes its own).
    """
    expert = project_expert_get(project, expert_id)
    with transaction.atomic():
        profile = expert_profile_lock(expert.pk)
        if profile is None:
            raise NotFound("No such expert in this project.")
        if profile.status == ExpertProfile.Status.PAUSED:
            profile.status = ExpertProfile.Status.ACTIVE
            profile.status_reason = f"Resumed by {by.username} in project {project.pk}."
            profile.status_changed_at = now
            profile.save(update_fields=["status", "status_reason", "status_changed_at"])
            if audited:
                audit_record(actor=by, action=AuditAction.EXPERT_RESUME, project_id=project.pk, now=now,
                             object_type="experts.user", object_ids=[expert.pk])
    return profile
