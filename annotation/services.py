"""Project-level writes: creating projects and granting membership."""
from django.db import transaction

from annotation import permissions
from annotation.models import Project
from annotation.models.project import LEASE_TIMEOUT_S, OVERLAP
from core.errors import DomainError
from experts.models import User
from rubrics.models import Rubric


@transaction.atomic
def project_create(*, name: str, created_by: User | None, overlap: int = OVERLAP.default,
                   lease_timeout_s: int = LEASE_TIMEOUT_S.default, description: str = "") -> Project:
    """Create a project with its (empty) rubric; the creating PM manages it.

    The ranges are the model's (`annotation.models.project`); checking them here gives a
    message per field instead of the database's IntegrityError.
    """
    name = (name or "").strip()
    if not name:
        raise DomainError("A project needs a name.", errors=[{"field": "name", "message": "required"}])
    if not OVERLAP.contains(overlap):
        raise DomainError(f"overlap must be between {OVERLAP.low} and {OVERLAP.high}, got {overlap}.",
                          errors=[{"field": "overlap", "message": f"expected {OVERLAP.low}..{OVERLAP.high}"}])
    if not LEASE_TIMEOUT_S.contains(lease_timeout_s):
        raise DomainError(f"lease_timeout_s must be at least {LEASE_TIMEOUT_S.low} seconds.",
                          errors=[{"field": "lease_timeout_s", "message": f"expected >= {LEASE_TIMEOUT_S.low}"}])
    rubric = Rubric.objects.create(name=name)
    project = Project.objects.create(name=name, rubric=rubric, overlap=overlap,
                                     lease_timeout_s=lease_timeout_s, description=description,
                                     created_by=created_by)
    if created_by is not None and created_by.is_pm:
        permissions.grant_manage(created_by, project)
    return project


def project_add_member(*, project: Project, user: User) -> None:
    """Make `user` a member: PMs manage the project, experts annotate in it."""
    if user.is_pm:
        permissions.grant_manage(user, project)
    elif user.is_expert:
        permissions.grant_annotate(user, project)
    else:
        raise DomainError("Admins reach every project already; only PMs and experts become members.")
