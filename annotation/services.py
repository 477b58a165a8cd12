"""Project-level writes: creating projects and granting membership."""
from typing import Any

from django.db import transaction

from annotation import permissions
from annotation.audit.services import audit_record
from annotation.models import AuditAction, Project
from annotation.models.project import LEASE_TIMEOUT_S, OVERLAP
from annotation.projects.fields import settings_clean
from core.errors import DomainError
from experts.models import User
from rubrics.models import Rubric


@transaction.atomic
def project_create(*, name: str, created_by: User | None, overlap: Any = OVERLAP.default,
                   lease_timeout_s: Any = LEASE_TIMEOUT_S.default, description: str = "",
                   due_date: Any = None, audited: bool = True) -> Project:
    """Create a project with its (empty) rubric; the creating PM manages it.

    Values are checked by the settings' one validation (`annotation.projects.fields`): one
    message per bad field in the user's language, and nothing written. The audit log gets a
    "project created" entry unless `audited` is False (a clone writes its own entry instead).
    """
    clean = settings_clean({"name": name if name is not None else "", "description": description or "",
                            "overlap": overlap, "lease_timeout_s": lease_timeout_s, "due_date": due_date})
    rubric = Rubric.objects.create(name=clean["name"])
    project = Project.objects.create(rubric=rubric, created_by=created_by, **clean)
    if created_by is not None and created_by.is_pm:
        permissions.grant_manage(created_by, project)
    if audited:
        audit_record(actor=created_by, action=AuditAction.PROJECT_CREATE, project_id=project.pk, objects=[project],
                     details={"name": project.name, "overlap": project.overlap,
                              "lease_timeout_s": project.lease_timeout_s, "due_date": project.due_date})
    return project


def project_add_member(*, project: Project, user: User) -> None:
    """Make `user` a member: PMs manage the project, experts annotate in it."""
    if user.is_pm:
        permissions.grant_manage(user, project)
    elif user.is_expert:
        permissions.grant_annotate(user, project)
    else:
        raise DomainError("Admins reach every project already; only PMs and experts become members.")
