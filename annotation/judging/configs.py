"""Judge configurations as immutable versions: create, edit (a new version), read, diff.

A configuration names what a judge run is asked with: the prompt template, the model,
the base URL, the temperature and other request parameters. A version is never
changed once written; editing writes version n + 1, and an edit that changes nothing
writes nothing. A run records the version it used (`JudgeRun.config_version`).

The prompt template is the prompt with four `str.format` placeholders, `{dialogue}`,
`{response}`, `{rubric}` and `{count}`; braces meant literally are doubled, as
`str.format` wants. The built-in template (:func:`builtin_prompt_template`) is the
HeartBench-structured prompt of `annotation.judging.prompt`, such that filling it
gives exactly what `render_judge_prompt` sends (a test holds the two together).

A live run started with a version (`judge_run_start(config_version=...)`) sends its
template, temperature and extra request fields (`annotation.judging.walker`); one started
without sends the built-in prompt at temperature 0, and its version is found or written
from the run's model and URL with that prompt (:func:`judge_config_version_for_run`), so
the version a run records is what it was actually asked with. An import of labels judged
elsewhere may name the version they were produced with.

Locks: the project row (`annotation.lock_objects.project_lock`) while a version number is drawn.
"""
from __future__ import annotations

import difflib
import json
import math
import string
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from annotation.audit.services import audit_record
from annotation.judging import prompt as judge_prompt
from annotation.lock_objects import project_lock
from annotation.models import AuditAction, JudgeConfig, JudgeConfigVersion, Project
from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError, NotFound
from experts.models import User

PLACEHOLDERS = ("dialogue", "response", "rubric", "count")
NAME_MAX = 100
TEMPLATE_MAX = 20_000
NOTE_MAX = 300
MODEL_MAX = 200
URL_MAX = 500
# The configuration live runs are recorded under (one per project, written on first use).
DEFAULT_CONFIG_NAME = "heartbench-judge"
BUILTIN_TEMPERATURE = 0.0


def builtin_prompt_template() -> str:
    """The built-in judge prompt as a template (see the module docstring)."""
    # The prompt module's sections are private to it; the template is assembled from the
    # same pieces so that the two can never drift apart.
    return "\n".join([
        judge_prompt._INSTRUCTIONS, "", judge_prompt._H_DIALOGUE, "{dialogue}", judge_prompt._H_RESPONSE,
        "{response}", judge_prompt._H_RUBRIC, "{rubric}", judge_prompt._H_COUNT, "{count}", "",
        judge_prompt._OUTPUT_FORMAT,
    ])


@dataclass(frozen=True)
class VersionInput:
    prompt_template: str
    judge_model: str
    base_url: str
    temperature: float
    params: dict[str, Any]
    note: str

    def same_as(self, version: JudgeConfigVersion) -> bool:
        return (self.prompt_template, self.judge_model, self.base_url, self.temperature, self.params) == (
            version.prompt_template, version.judge_model, version.base_url, version.temperature, version.params)


def _clean(*, prompt_template: object, judge_model: object, base_url: object, temperature: object,
           params: object, note: object) -> VersionInput:
    """Check every field; raise one DomainError listing each bad one (nothing is written)."""
    errors: list[dict[str, Any]] = []

    def bad(field: str, code: str, message: str, **params_: Any) -> None:
        errors.append({"field": field, "code": code, "message": message, **({"params": params_} if params_ else {})})

    template = prompt_template.replace("\r\n", "\n") if isinstance(prompt_template, str) else ""
    if not template.strip():
        bad("prompt_template", ErrorCode.REQUIRED, "required")
    elif len(template) > TEMPLATE_MAX:
        bad("prompt_template", ErrorCode.TOO_LONG, f"at most {TEMPLATE_MAX} characters")
    else:
        missing = _placeholders_missing(template)
        if missing:
            bad("prompt_template", ErrorCode.JUDGE_PROMPT_PLACEHOLDERS, f"missing or malformed: {missing}",
                missing=missing)
    model = judge_model.strip() if isinstance(judge_model, str) else ""
    if len(model) > MODEL_MAX:
        bad("judge_model", ErrorCode.TOO_LONG, f"at most {MODEL_MAX} characters")
    url = base_url.strip() if isinstance(base_url, str) else ""
    if len(url) > URL_MAX:
        bad("base_url", ErrorCode.TOO_LONG, f"at most {URL_MAX} characters")
    elif url and not url.startswith(("http://", "https://")):
        bad("base_url", ErrorCode.BAD_URL, "expected an http(s) URL")
    try:
        temp = float(temperature if temperature not in (None, "") else 0.0)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        temp = math.nan
    if not math.isfinite(temp) or not 0 <= temp <= 2:
        bad("temperature", ErrorCode.TEMPERATURE_RANGE, "expected a number from 0 to 2")
    clean_params: dict[str, Any] = {}
    if isinstance(params, dict):
        clean_params = params
    elif isinstance(params, str) and params.strip():
        try:
            loaded = json.loads(params)
        except ValueError:
            loaded = None
        if isinstance(loaded, dict):
            clean_params = loaded
        else:
            bad("params", ErrorCode.PARAMS_NOT_OBJECT, "expected a JSON object")
    elif params not in (None, ""):
        bad("params", ErrorCode.PARAMS_NOT_OBJECT, "expected a JSON object")
    clean_note = note.strip() if isinstance(note, str) else ""
    if len(clean_note) > NOTE_MAX:
        bad("note", ErrorCode.TOO_LONG, f"at most {NOTE_MAX} characters")
    if errors:
        first = errors[0]
        raise DomainError(f"The judge configuration was not saved: {first['field']}: {first['message']}.",
                          code=ErrorCode.JUDGE_CONFIG_INVALID, errors=errors)
    return VersionInput(template, model, url, temp, clean_params, clean_note)


def _placeholders_missing(template: str) -> str:
    """The required placeholders the template lacks, as `{name}` text; unknown or malformed fields count too."""
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError:
        return "{dialogue}, {response}, {rubric}, {count} (a lone { or } must be doubled)"
    missing = [f"{{{p}}}" for p in PLACEHOLDERS if p not in fields]
    unknown = sorted(f"{{{f}}}" for f in fields - set(PLACEHOLDERS))
    if unknown:
        missing.append(f"no other field ({', '.join(unknown)}; double the braces meant literally)")
    return ", ".join(missing)


def judge_config_create(*, project: Project, name: object, prompt_template: object, judge_model: object = "",
                        base_url: object = "", temperature: object = 0.0, params: object = None,
                        note: object = "", created_by: User | None, now: datetime) -> JudgeConfigVersion:
    """A new named configuration with its version 1; DomainError on any bad field (nothing written)."""
    clean_name = name.strip() if isinstance(name, str) else ""
    name_error = None
    if not clean_name:
        name_error = {"field": "name", "code": ErrorCode.REQUIRED, "message": "required"}
    elif len(clean_name) > NAME_MAX:
        name_error = {"field": "name", "code": ErrorCode.TOO_LONG, "message": f"at most {NAME_MAX} characters"}
    try:
        data = _clean(prompt_template=prompt_template, judge_model=judge_model, base_url=base_url,
                      temperature=temperature, params=params, note=note)
    except DomainError as exc:
        if name_error:
            exc.errors.insert(0, name_error)
        raise
    if name_error:
        raise DomainError(f"The judge configuration was not saved: name: {name_error['message']}.",
                          code=ErrorCode.JUDGE_CONFIG_INVALID, errors=[name_error])
    try:
        with transaction.atomic():
            project_lock(project.pk)
            config = JudgeConfig.objects.create(project=project, name=clean_name, created_at=now)
            version = _version_write(config=config, number=1, data=data, created_by=created_by, now=now)
            _audit(action=AuditAction.JUDGE_CONFIG_CREATE, version=version, by=created_by, now=now)
            return version
    except IntegrityError:
        raise DomainError("The judge configuration was not saved: name: taken.",
                          code=ErrorCode.JUDGE_CONFIG_INVALID,
                          errors=[{"field": "name", "code": ErrorCode.JUDGE_CONFIG_NAME_TAKEN,
                                   "message": "taken"}]) from None


def _audit(*, action: AuditAction, version: JudgeConfigVersion, by: User | None, now: datetime) -> None:
    audit_record(actor=by, action=action, project_id=version.config.project_id, objects=[version.config], now=now,
                 details={"name": version.config.name, "version": version.number, "version_id": version.pk,
                          "judge_model": version.judge_model, "base_url": version.base_url,
                          "temperature": version.temperature, "note": version.note})


def _version_write(*, config: JudgeConfig, number: int, data: VersionInput, created_by: User | None,
                   now: datetime) -> JudgeConfigVersion:
    return JudgeConfigVersion.objects.create(
        config=config, number=number, prompt_template=data.prompt_template, judge_model=data.judge_model,
        base_url=data.base_url, temperature=data.temperature, params=data.params, note=data.note,
        created_by=created_by, created_at=now)


def judge_config_edit(*, config: JudgeConfig, prompt_template: object, judge_model: object = "",
                      base_url: object = "", temperature: object = 0.0, params: object = None, note: object = "",
                      created_by: User | None, now: datetime) -> JudgeConfigVersion:
    """Write version n + 1 of `config`; Conflict when it would say exactly what version n says."""
    data = _clean(prompt_template=prompt_template, judge_model=judge_model, base_url=base_url,
                  temperature=temperature, params=params, note=note)
    with transaction.atomic():
        project_lock(config.project_id)
        latest = config.versions.order_by("-number").first()
        if latest is not None and data.same_as(latest):
            raise Conflict(f"Nothing changed since version {latest.number}.", code=ErrorCode.JUDGE_CONFIG_UNCHANGED,
                           params={"number": latest.number})
        version = _version_write(config=config, number=(latest.number if latest else 0) + 1, data=data,
                                 created_by=created_by, now=now)
        _audit(action=AuditAction.JUDGE_CONFIG_EDIT, version=version, by=created_by, now=now)
        return version


def judge_config_version_for_run(*, project: Project, judge_model: str, base_url: str, created_by: User | None,
                                 now: datetime) -> JudgeConfigVersion:
    """The version a live run is asked with (built-in prompt, temperature 0, this model and URL), written if new.

    Looked up in the project's default configuration; a model or URL it has not seen yet
    becomes its next version. Call inside the transaction that creates the run.
    """
    project_lock(project.pk)
    config, _ = JudgeConfig.objects.get_or_create(project=project, name=DEFAULT_CONFIG_NAME,
                                                  defaults={"created_at": now})
    template = builtin_prompt_template()
    data = VersionInput(template, judge_model, base_url, BUILTIN_TEMPERATURE, {}, "")
    for version in config.versions.order_by("-number"):
        if data.same_as(version):
            return version
    latest = config.versions.order_by("-number").values_list("number", flat=True).first() or 0
    return _version_write(config=config, number=latest + 1, data=data, created_by=created_by, now=now)


# --- Reading ---------------------------------------------------------------------------------

def judge_config_get_for_project(project: Project, config_id: object) -> JudgeConfig:
    try:
        return JudgeConfig.objects.get(pk=int(str(config_id)), project=project)
    except (JudgeConfig.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such judge configuration.") from None


def judge_config_version_get(config: JudgeConfig, number: object) -> JudgeConfigVersion:
    try:
        return config.versions.get(number=int(str(number)))
    except (JudgeConfigVersion.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such version.") from None


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "same", "added", "removed", "gap"
    old_no: int | None
    new_no: int | None
    text: str


@dataclass(frozen=True)
class SettingChange:
    field: str
    old: str
    new: str


@dataclass(frozen=True)
class VersionDiff:
    old: JudgeConfigVersion
    new: JudgeConfigVersion
    lines: list[DiffLine]
    settings: list[SettingChange]

    @property
    def prompt_changed(self) -> bool:
        return any(line.kind in ("added", "removed") for line in self.lines)


def judge_config_diff(*, old: JudgeConfigVersion, new: JudgeConfigVersion, context: int = 3) -> VersionDiff:
    """The prompt's line diff (difflib, `context` unchanged lines around each change) and changed settings."""
    a, b = old.prompt_template.splitlines(), new.prompt_template.splitlines()
    lines: list[DiffLine] = []
    for group in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_grouped_opcodes(context):
        if lines:
            lines.append(DiffLine("gap", None, None, "…"))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines.extend(DiffLine("same", i + 1, j1 + k + 1, a[i]) for k, i in enumerate(range(i1, i2)))
                continue
            if tag in ("replace", "delete"):
                lines.extend(DiffLine("removed", i + 1, None, a[i]) for i in range(i1, i2))
            if tag in ("replace", "insert"):
                lines.extend(DiffLine("added", None, j + 1, b[j]) for j in range(j1, j2))
    settings = [
        SettingChange(field, str(x), str(y))
        for field, x, y in (
            ("judge_model", old.judge_model, new.judge_model),
            ("base_url", old.base_url, new.base_url),
            ("temperature", f"{old.temperature:g}", f"{new.temperature:g}"),
            ("params", json.dumps(old.params, ensure_ascii=False, sort_keys=True),
             json.dumps(new.params, ensure_ascii=False, sort_keys=True)),
        )
        if x != y
    ]
    return VersionDiff(old=old, new=new, lines=lines, settings=settings)
