"""Row locks taken by imports, in one fixed order.

Lock order: the project's `rubrics.Rubric` row first, then any `RubricVersion` row
(`rubric_version_publish` locks the version it publishes). Imports into one project
therefore run one after another: two uploads of the same file cannot both see a
question as new and collide on the unique constraint halfway through a write.
"""
from annotation.models import Project
from rubrics.models import Rubric


def project_imports_lock(*, project: Project) -> None:
    """Hold the project's rubric row until the surrounding transaction ends."""
    list(Rubric.objects.select_for_update().filter(pk=project.rubric_id).values_list("pk", flat=True))
