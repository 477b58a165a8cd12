"""Reads for the PM's quality pages, scoped to one project the caller already fetched for the PM."""
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count

from annotation.calibration.services import CalibrationState, calibration_states_for_experts
from annotation.models import Assignment, Project
from annotation.quality.control import ControlAccuracy, control_accuracy_for_experts
from annotation.selectors import project_experts
from experts.models import ExpertProfile, User


@dataclass(frozen=True)
class ExpertQualityRow:
    """One expert on the experts page: who, tier and status, calibration, control accuracy, work done."""

    expert: User
    profile: ExpertProfile | None
    calibration: CalibrationState
    control: ControlAccuracy
    submitted: int  # work assignments submitted, control tasks among them (the expert cannot tell them apart)


def expert_quality_rows_for_project(project: Project, *, now: datetime) -> list[ExpertQualityRow]:
    """Every expert of `project`, by username, in a fixed number of queries however many experts there are."""
    experts = list(project_experts(project).select_related("expert_profile"))
    submitted = dict(Assignment.objects.filter(task__project=project, expert__in=experts, kind=Assignment.Kind.WORK,
                                               status=Assignment.Status.SUBMITTED)
                     .values("expert").annotate(n=Count("pk")).values_list("expert", "n"))
    calibration = calibration_states_for_experts(project=project, experts=experts, now=now)
    control = control_accuracy_for_experts(project=project, experts=experts, window=project.control_window)
    return [
        ExpertQualityRow(expert=expert, profile=getattr(expert, "expert_profile", None),
                         calibration=calibration[expert.pk], control=control[expert.pk],
                         submitted=submitted.get(expert.pk, 0))
        for expert in experts
    ]
