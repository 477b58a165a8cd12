"""Which version's guidelines a project member may read."""
from annotation.selectors import ProjectAccess, rubric_version_current
from core.errors import NotFound
from rubrics.models import RubricVersion


def guidelines_version_for(access: ProjectAccess, number: str | None) -> RubricVersion | None:
    """The rubric version whose guidelines `access.user` reads: `number`, or the current published one.

    Any member reads published versions (an expert's task may still be on an older one);
    only the project's PMs and admins read the draft. Another version, a draft for an
    expert, or a number that is not one: NotFound. None when nothing is published yet.
    """
    project = access.project
    if not number:
        return rubric_version_current(project)
    try:
        version = RubricVersion.objects.get(rubric_id=project.rubric_id, number=int(number))
    except (RubricVersion.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such rubric version.") from None
    if not version.is_published and not access.manages:
        raise NotFound("No such rubric version.")
    return version
