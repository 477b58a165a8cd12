"""A project's quality settings: calibration threshold and size, retry delay, control tasks, tier gate.

One validation path: these are settings of `annotation.projects.services.project_settings_update`,
narrowed to the quality keys, so the quality API and the settings page refuse the same values
with the same messages, and every change lands in the setting history.
"""
from typing import Any

from django.utils import timezone

from annotation.models import Project
from annotation.projects.fields import QUALITY_FIELDS
from annotation.projects.services import project_settings_update
from experts.models import User

FIELDS = QUALITY_FIELDS


def project_quality_update(*, project: Project, values: dict[str, Any], changed_by: User | None = None) -> Project:
    """Change some of the project's quality settings; every given value is checked, and one bad
    value writes nothing (DomainError with one entry per bad field)."""
    return project_settings_update(project=project, values=values, changed_by=changed_by, now=timezone.now(),
                                   allowed=QUALITY_FIELDS).project
