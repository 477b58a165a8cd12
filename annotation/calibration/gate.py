"""The calibration gate on real work, kept apart from the calibration services so that the
assignment services can call it without importing the submission services (which
calibration reuses for label validation)."""
from annotation.calibration.selectors import project_has_golden_set
from annotation.models import CalibrationAttempt, Project
from core.errors import Forbidden
from experts.models import User


def calibration_check(*, project: Project, expert: User) -> None:
    """Raise Forbidden (code "calibration_required") unless the expert may lease real work in `project`.

    Calibration gates work once the project has a golden set; from then on the expert
    needs a passed attempt that no rubric change has made stale.
    """
    if not project_has_golden_set(project):
        return
    if CalibrationAttempt.objects.filter(project=project, expert=expert,
                                         status=CalibrationAttempt.Status.PASSED).exists():
        return
    raise Forbidden("Pass the calibration on the project's current rubric version before taking real tasks.",
                    code="calibration_required")
