"""Label values as experts send them: one leaf module, so that submission and calibration
both validate marks without importing each other."""
from typing import Any

from core.error_codes import ErrorCode
from core.errors import DomainError

MAX_NOTE_CHARS = 2000


def labels_clean(raw: Any, item_keys: list[str], *, partial: bool) -> dict[str, int]:
    """Validate {item_key: 0|1}; with partial=False every item must be present (also used by calibration).

    Each error names its `field`, a `message` in English and a stable `code` that pages
    translate: "missing", "unknown_item", "not_binary" (or "not_object" for the whole map).
    """
    if not isinstance(raw, dict):
        raise DomainError('"labels" must be an object mapping rubric item ids to 0 or 1.',
                          errors=[{"field": "labels", "code": "not_object", "message": "expected an object"}])
    errors = []
    known = set(item_keys)
    clean: dict[str, int] = {}
    for key, value in raw.items():
        if key not in known:
            errors.append({"field": f"labels.{key}", "code": "unknown_item",
                           "message": "not a rubric item of this task"})
        elif isinstance(value, bool) or value not in (0, 1) or not isinstance(value, int):
            errors.append({"field": f"labels.{key}", "code": "not_binary",
                           "message": f"expected 0 or 1, got {value!r}"})
        else:
            clean[key] = value
    if not partial:
        missing = [k for k in item_keys if k not in raw]
        errors.extend({"field": f"labels.{k}", "code": "missing", "message": "missing: every rubric item needs a label"}
                      for k in missing)
    if errors:
        count = len(errors)
        raise DomainError(f"{count} label{'s' if count != 1 else ''} need attention; nothing was saved.",
                          code=ErrorCode.INVALID_LABELS, errors=errors, params={"count": count})
    return clean


def notes_clean(raw, item_keys: list[str]) -> dict[str, str]:
    """Validate {item_key: text}: known items, text of at most MAX_NOTE_CHARS; blank notes are dropped."""
    if raw in (None, ""):
        return {}
    if not isinstance(raw, dict):
        raise DomainError('"notes" must be an object mapping rubric item ids to text.',
                          errors=[{"field": "notes", "message": "expected an object"}])
    known = set(item_keys)
    errors = [{"field": f"notes.{k}", "message": "not a rubric item of this task"} for k in raw if k not in known]
    errors += [{"field": f"notes.{k}", "message": f"expected text of at most {MAX_NOTE_CHARS} characters"}
               for k, v in raw.items() if k in known and (not isinstance(v, str) or len(v) > MAX_NOTE_CHARS)]
    if errors:
        raise DomainError("Some notes are invalid; nothing was saved.", code="invalid_notes", errors=errors)
    return {k: v for k, v in raw.items() if v.strip()}
