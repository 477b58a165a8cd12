"""Reads of the project setup pages and API."""
from django.db.models import F, QuerySet

from annotation.models import Assignment, Project, ProjectSettingChange, Task
from annotation.selectors import rubric_version_current


def overlap_existing_tasks(project: Project, overlap: int) -> QuerySet[Task]:
    """The regular tasks of the current rubric version that raising the overlap to `overlap`
    would give extra slots when applied to existing tasks (open, full or complete). A task's panel
    is its overlap without the extra experts it got for ties."""
    version = rubric_version_current(project)
    if version is None:
        return Task.objects.none()
    return (Task.objects.filter(project=project, rubric_version=version, is_golden=False)
            .alias(panel=F("overlap") - F("extra_slots")).filter(panel__lt=overlap))


def overlap_preview(project: Project, overlap: int) -> dict[str, int]:
    """How many tasks an overlap raise would touch for existing tasks, and how many of them reopen."""
    tasks = overlap_existing_tasks(project, overlap)
    return {"tasks": tasks.count(), "reopen": tasks.filter(status=Task.Status.COMPLETE).count()}


def open_leases(project: Project) -> QuerySet[Assignment]:
    """The project's leases still running (work and calibration)."""
    return Assignment.objects.filter(task__project=project, status=Assignment.Status.LEASED)


def setting_changes_for_project(project: Project, *, limit: int = 200) -> list[ProjectSettingChange]:
    return list(ProjectSettingChange.objects.filter(project=project).select_related("changed_by")[:limit])
