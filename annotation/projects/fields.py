"""The project settings a PM edits, each with its translated label and its one validation.

The ranges are `annotation.models.project.SettingRange`s (the model's constraints read the
same ones); this module turns raw input (form strings or JSON values) into clean values,
with one error per bad field in the user's language and the field's key in `field`, so the
API names the key while the pages show the label.
"""
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.utils.functional import Promise
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from annotation.models.project import (
    APPEAL_WINDOW_DAYS,
    CALIBRATION_RETRY_DELAY_S,
    CALIBRATION_SIZE,
    CALIBRATION_THRESHOLD_PCT,
    CONSULT_DEADLINE_H,
    CONSULT_SPLIT_MIN_SCORE,
    CONSULT_SPLIT_SHARE_PCT,
    CONTROL_PAUSE_BELOW_PCT,
    CONTROL_RATE_PCT,
    CONTROL_WINDOW,
    JUDGE_AGREEMENT_BAR_PCT,
    LEASE_TIMEOUT_S,
    MIN_SECONDS_PER_ITEM,
    OVERLAP,
    REMIND_IDLE_DAYS,
    REMIND_LEASE_MINUTES,
    REVIEW_RUN_LENGTH,
    TIE_EXTRA_CAP,
    ConsensusLabels,
    FillOrder,
    SettingRange,
)
from core.error_codes import ErrorCode
from core.errors import DomainError
from experts.models import Tier

NAME_MAX = 200
DESCRIPTION_MAX = 5000


@dataclass(frozen=True)
class SettingField:
    """One editable setting: its key, its label for people, and what it accepts."""

    name: str
    label: Promise
    kind: str  # "int", "text", "tier", "date", "bool" or "choice"
    range: SettingRange | None = None
    quality: bool = False
    choices: tuple[tuple[str, str | Promise], ...] = ()  # a "choice": (value, label)


FIELDS: tuple[SettingField, ...] = (
    SettingField("name", _("Name"), "text"),
    SettingField("description", _("Description"), "text"),
    SettingField("overlap", _("Overlap (experts per task)"), "int", OVERLAP),
    SettingField("lease_timeout_s", _("Lease timeout (seconds)"), "int", LEASE_TIMEOUT_S),
    SettingField("due_date", _("Due date"), "date"),
    SettingField("fill_order", _("Fill order"), "choice", choices=tuple(FillOrder.choices)),
    SettingField("judge_agreement_bar_pct", _("Judge agreement bar (%)"), "int", JUDGE_AGREEMENT_BAR_PCT),
    SettingField("tie_extra_experts", _("Draw an extra expert for ties"), "bool"),
    SettingField("tie_extra_cap", _("Most extra experts per task"), "int", TIE_EXTRA_CAP),
    SettingField("appeal_window_days", _("Appeal window (days)"), "int", APPEAL_WINDOW_DAYS),
    SettingField("consult_on_unbroken_tie", _("Consult on a tie extra experts could not break"), "bool"),
    SettingField("consult_on_score_split", _("Consult on a split high-score item"), "bool"),
    SettingField("consult_split_min_score", _("High-score item: lowest |score|"), "int", CONSULT_SPLIT_MIN_SCORE),
    SettingField("consult_on_many_splits", _("Consult on a task where many items split"), "bool"),
    SettingField("consult_split_share_pct", _("Many splits: share of items above (%)"), "int",
                 CONSULT_SPLIT_SHARE_PCT),
    SettingField("consult_deadline_h", _("Blind vote deadline (hours)"), "int", CONSULT_DEADLINE_H),
    SettingField("consult_show_judge", _("Show the judge's label when votes are revealed"), "bool"),
    SettingField("judge_reveal", _("Show the judge's labels to experts after they submit"), "bool"),
    SettingField("consensus_labels", _("Labels consensus and reports use"), "choice",
                 choices=tuple(ConsensusLabels.choices)),
    SettingField("min_seconds_per_item", _("Review: least seconds per item (0: off)"), "int", MIN_SECONDS_PER_ITEM),
    SettingField("review_run_length", _("Review: same label on every item, tasks in a row (0: off)"), "int",
                 REVIEW_RUN_LENGTH),
    SettingField("review_repeated_notes", _("Review: flag notes repeated word for word"), "bool"),
    SettingField("remind_lease_expiring", _("Remind experts before a lease ends"), "bool"),
    SettingField("remind_lease_minutes", _("Lease reminder: minutes before the end"), "int", REMIND_LEASE_MINUTES),
    SettingField("remind_idle_days", _("Remind an expert idle this many days (0: off)"), "int", REMIND_IDLE_DAYS),
    SettingField("alert_quality", _("Alert PMs to drift and falling control accuracy"), "bool"),
    SettingField("alert_deadline_risk", _("Alert PMs when the forecast passes the due date"), "bool"),
    SettingField("calibration_threshold_pct", _("Calibration pass mark (%)"), "int", CALIBRATION_THRESHOLD_PCT,
                 quality=True),
    SettingField("calibration_size", _("Calibration tasks per attempt"), "int", CALIBRATION_SIZE, quality=True),
    SettingField("calibration_retry_delay_s", _("Calibration retry delay (seconds)"), "int",
                 CALIBRATION_RETRY_DELAY_S, quality=True),
    SettingField("control_rate_pct", _("Control-task rate (%)"), "int", CONTROL_RATE_PCT, quality=True),
    SettingField("control_pause_below_pct", _("Pause below control accuracy (%)"), "int", CONTROL_PAUSE_BELOW_PCT,
                 quality=True),
    SettingField("control_window", _("Control tasks looked back over"), "int", CONTROL_WINDOW, quality=True),
    SettingField("hard_min_tier", _("Lowest tier for hard questions"), "tier", quality=True),
)
BY_NAME: dict[str, SettingField] = {f.name: f for f in FIELDS}
QUALITY_FIELDS = tuple(f.name for f in FIELDS if f.quality)
# Lifecycle moves are kept in the same history as the settings.
HISTORY_LABELS: dict[str, Promise] = {
    **{f.name: f.label for f in FIELDS},
    "state": _("State"),
    "archived": _("Archived"),
}


def setting_label(name: str) -> str:
    """The translated label of a setting (or of a lifecycle entry) for the history."""
    label = HISTORY_LABELS.get(name)
    return str(label) if label is not None else name


def _whole_number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def _error(field: SettingField, code: str, **params: Any) -> dict[str, Any]:
    params = {"label": str(field.label), **params}
    return {"field": field.name, "code": code, "params": params,
            "message": str(ErrorCode(code).label) % params}


def _clean_int(field: SettingField, value: Any) -> tuple[int | None, dict[str, Any] | None]:
    assert field.range is not None
    number = _whole_number(value)
    if number is not None and field.range.contains(number):
        return number, None
    if field.range is LEASE_TIMEOUT_S and (number is None or number < field.range.low):
        return None, _error(field, ErrorCode.LEASE_TOO_SHORT, minutes=field.range.low // 60,
                            seconds=field.range.low)
    if field.range.high is None:
        return None, _error(field, ErrorCode.SETTING_TOO_SMALL, low=field.range.low)
    return None, _error(field, ErrorCode.SETTING_OUT_OF_RANGE, low=field.range.low, high=field.range.high)


def _clean_one(field: SettingField, value: Any) -> tuple[Any, dict[str, Any] | None]:
    if field.kind == "int":
        return _clean_int(field, value)
    if field.kind == "text":
        text = value.strip() if isinstance(value, str) else None
        limit = NAME_MAX if field.name == "name" else DESCRIPTION_MAX
        if text is None or (field.name == "name" and not text):
            return None, _error(field, ErrorCode.SETTING_REQUIRED)
        if len(text) > limit:
            return None, _error(field, ErrorCode.SETTING_TOO_LONG, limit=limit)
        return text, None
    if field.kind == "bool":
        # The settings page posts "off" from a hidden input and "on" from the ticked box after it.
        if isinstance(value, bool):
            return value, None
        if isinstance(value, str) and value.strip().lower() in ("on", "true", "1", "off", "false", "0"):
            return value.strip().lower() in ("on", "true", "1"), None
        return None, _error(field, ErrorCode.SETTING_CHOICE)
    if field.kind == "tier":
        if isinstance(value, str) and value in Tier.values:
            return value, None
        return None, _error(field, ErrorCode.SETTING_CHOICE)
    if field.kind == "choice":
        if isinstance(value, str) and value in {choice for choice, _label in field.choices}:
            return value, None
        return None, _error(field, ErrorCode.SETTING_CHOICE)
    # A date: empty clears it; otherwise YYYY-MM-DD exactly.
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, None
    if isinstance(value, dt.date):
        return value, None
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value.strip()), None
        except ValueError:
            pass
    return None, _error(field, ErrorCode.SETTING_BAD_DATE)


def settings_clean(values: Mapping[str, Any], *, allowed: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The clean values of `values`, or a DomainError ("invalid_settings") with one entry per bad field.

    `allowed` narrows the keys accepted (the quality API accepts its own settings only);
    a key outside it is refused, never ignored.
    """
    names = allowed if allowed is not None else tuple(BY_NAME)
    errors: list[dict[str, Any]] = []
    clean: dict[str, Any] = {}
    for key, value in values.items():
        field = BY_NAME.get(key)
        if field is None or key not in names:
            errors.append({"field": key, "code": ErrorCode.UNKNOWN_SETTING, "params": {"name": key},
                           "message": str(ErrorCode.UNKNOWN_SETTING.label) % {"name": key}})
            continue
        cleaned, error = _clean_one(field, value)
        if error is not None:
            errors.append(error)
        else:
            clean[key] = cleaned
    if errors:
        raise DomainError(gettext("%(count)d setting(s) need attention; nothing was changed.")
                          % {"count": len(errors)}, code=ErrorCode.INVALID_SETTINGS, errors=errors)
    return clean


def setting_text(name: str, value: Any) -> str:
    """A setting's value as the history stores it."""
    if value is None:
        return ""
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)
