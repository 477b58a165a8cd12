"""What a project's lifecycle state allows; every write path of the app asks here.

Kept free of service imports so that assignment, submission, import and rubric modules
can call it without an import cycle.
"""
from annotation.models import Project, ProjectState
from core.error_codes import ErrorCode
from core.errors import Conflict


def project_check_writable(project: Project) -> None:
    """Refuse any change to a closed project (code "project_closed"): submissions, imports,
    rubric edits, settings. Exports and reports read and are not asked."""
    if project.state == ProjectState.CLOSED:
        raise Conflict("This project is closed; it is read-only.", code=ErrorCode.PROJECT_CLOSED)


def project_check_leasing(project: Project) -> None:
    """Refuse a new lease unless the project is active ("project_paused", "project_closed")."""
    project_check_writable(project)
    if project.state == ProjectState.PAUSED:
        raise Conflict("This project is paused; no new leases.", code=ErrorCode.PROJECT_PAUSED)
