"""A project's quality settings: calibration threshold and size, retry delay, control tasks, tier gate."""
from typing import Any

from django.db import transaction

from annotation.lock_objects import project_lock
from annotation.models import Project
from annotation.models.project import QUALITY_SETTINGS
from core.errors import DomainError
from experts.models import Tier

# The ranges are the model's, which its check constraints also read; checking here first
# gives the PM one message per field instead of an IntegrityError.
FIELDS = tuple(s.name for s in QUALITY_SETTINGS) + ("hard_min_tier",)


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


@transaction.atomic
def project_quality_update(*, project: Project, values: dict[str, Any]) -> Project:
    """Change some of the project's quality settings; every given value is checked, and one bad
    value writes nothing (DomainError with one entry per bad field)."""
    errors = [{"field": key, "message": "not a quality setting"} for key in values if key not in FIELDS]
    clean: dict[str, Any] = {}
    for setting in QUALITY_SETTINGS:
        if setting.name not in values:
            continue
        number = _as_int(values[setting.name])
        if number is None or not setting.contains(number):
            errors.append({"field": setting.name,
                           "message": f"expected a whole number from {setting.low} to {setting.high}, "
                                      f"got {values[setting.name]!r}"})
        else:
            clean[setting.name] = number
    if "hard_min_tier" in values:
        if values["hard_min_tier"] in Tier.values:
            clean["hard_min_tier"] = values["hard_min_tier"]
        else:
            errors.append({"field": "hard_min_tier",
                           "message": f"expected one of {', '.join(Tier.values)}, got {values['hard_min_tier']!r}"})
    if errors:
        raise DomainError(f"{len(errors)} setting(s) need attention; nothing was changed.",
                          code="invalid_settings", errors=errors)
    project = project_lock(project.pk)
    for name, value in clean.items():
        setattr(project, name, value)
    if clean:
        project.save(update_fields=list(clean))
    return project
