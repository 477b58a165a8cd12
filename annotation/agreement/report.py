"""The agreement report of one project, rubric version and judge run, read from the database.

Reading the labels is the real cost (about 130,000 expert labels at HeartBench scale,
1.3 million at ten times that), so they are read as columns, never as model objects:
on PostgreSQL each big read is ONE row holding one packed big-endian buffer per column
(see :func:`read_columns`), which numpy turns into arrays without a Python loop; in the
embedded SQLite mode the same SELECT goes through ``fetchall``. Only the tasks somebody
worked on are read (:func:`worked_tasks`), so a report costs what the work done costs, not
what the project holds. Small lookups (questions, rubric items, dimensions, experts) are
plain ``values_list`` queries. The statistics then run in
:mod:`annotation.agreement.sections`, which has no Django import.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import psycopg
from django.apps import apps
from django.conf import settings
from django.db import connection, models
from django.utils import timezone
from numpy.typing import NDArray

from annotation.agreement.material import Dim, Expert, JudgedUnits, Material, Params
from annotation.agreement.sections import THIN_DIALOGUES, report_sections
from annotation.models import (
    Adjudication,
    Assignment,
    JudgeLabel,
    JudgeRun,
    JudgeTaskResult,
    Label,
    Project,
    Question,
    Response,
    Task,
)
from annotation.reveal.figures import reveal_section
from annotation.reveal.material import revisions_apply
from experts.models import ExpertProfile
from rubrics.models import Dimension, RubricItem, RubricVersion

SCHEMA = 1
CONTENT_CHARS = 200

_WIRE = {"int2": ">i2", "int8": ">i8", "float8": ">f8"}
_NATIVE = {"int2": np.int16, "int8": np.int64, "float8": np.float64}


class GoldenReference(NamedTuple):
    """Reference labels of golden tasks as aligned arrays (empty until the model exists)."""

    task_id: NDArray[np.int64]
    rubric_item_id: NDArray[np.int64]
    value: NDArray[np.int8]


# ------------------------------------------------------------------ reading columns


def _epoch(column: str) -> str:
    """SQL for a timestamp column as float seconds since 1970 (UTC)."""
    if connection.vendor == "postgresql":
        return f"CAST(EXTRACT(EPOCH FROM {column}) AS double precision)"
    return f"CAST((julianday({column}) - 2440587.5) * 86400.0 AS REAL)"


_SEND = {"int2": "int2send", "int8": "int8send", "float8": "float8send"}


def read_columns(sql: str, params: list[Any], types: list[str]) -> list[NDArray[Any]]:
    """Run a SELECT whose columns are non-null and of `types` (int2/int8/float8); one array per column.

    On PostgreSQL the rows never cross the wire one by one: the server packs each column
    into one bytea (``string_agg(int8send(col), '')``, big-endian binary), so the answer
    is a single row of a few buffers that numpy reads without a copy. All aggregates of
    one query see the rows in the same order, so the columns stay aligned. (A binary
    COPY would also be fixed-width, but psycopg yields it one message, that is one row,
    at a time: about 6 s per million rows in Python.)
    """
    if connection.vendor == "postgresql":
        return _packed_columns(sql, params, types)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not rows:
        return [np.zeros(0, dtype=_NATIVE[t]) for t in types]
    return [np.asarray(column, dtype=_NATIVE[t]) for column, t in zip(zip(*rows), types)]


def _packed_columns(sql: str, params: list[Any], types: list[str]) -> list[NDArray[Any]]:
    names = [f"c{i}" for i in range(len(types))]
    packed = ", ".join(f"string_agg({_SEND[t]}({name}), ''::bytea)" for name, t in zip(names, types))
    query = f"SELECT {packed} FROM ({sql}) AS packed_rows({', '.join(names)})"
    connection.ensure_connection()
    # A server-side-binding cursor of its own: binary results need the extended protocol.
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(query, params, binary=True)
        row = cursor.fetchone()
    return [np.zeros(0, dtype=_NATIVE[t]) if buf is None else np.frombuffer(buf, dtype=_WIRE[t]).astype(_NATIVE[t])
            for buf, t in zip(row, types)]


def _lookup(sorted_ids: NDArray[np.int64], ids: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Positions of `ids` in an ascending id array, and which of them are there at all."""
    if sorted_ids.size == 0:
        return np.zeros(ids.size, np.int64), np.zeros(ids.size, bool)
    pos = np.minimum(np.searchsorted(sorted_ids, ids), sorted_ids.size - 1)
    return pos.astype(np.int64), sorted_ids[pos] == ids


# ------------------------------------------------------------------------- golden


def golden_reference_matrix(project: Project) -> GoldenReference:
    """The reference labels of the project's golden tasks, or empty arrays while none are modelled.

    Golden references are modelled by the calibration work (``annotation.GoldenReference``
    with ``task``, ``rubric_item`` and ``value``); until that model exists golden
    accuracy is simply empty, and it appears without a change here once it lands.
    """
    empty = GoldenReference(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int8))
    try:
        model = apps.get_model("annotation", "GoldenReference")
    except LookupError:
        return empty
    rows = list(model.objects.filter(task__project=project).values_list("task_id", "rubric_item_id", "value"))
    if not rows:
        return empty
    task_ids, item_ids, values = zip(*rows)
    return GoldenReference(np.asarray(task_ids, np.int64), np.asarray(item_ids, np.int64),
                           np.asarray(values, np.int8))


# ------------------------------------------------------------------------ material


def _empty_material(n_slots: int, dims: list[Dim]) -> Material:
    i64, f64, i8 = np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, np.int8)
    return Material(
        n_slots=n_slots, task_id=i64, task_question=i64, task_model=i64, task_golden=np.zeros(0, bool),
        question_ext=[], question_difficulty=i64, difficulties=[], models=[], item_id=i64, item_position=i64,
        item_dim=i64, item_score=f64, dims=dims, experts=[], a_task=i64, a_expert=i64, a_submitted=f64,
        a_leased=f64, unit_task=i64, unit_item=i64, labels=np.zeros((0, n_slots), np.int8),
        unit_expert=np.zeros((0, n_slots), np.int64), unit_time=np.zeros((0, n_slots)), golden_task=i64,
        golden_item=i64, golden_expert=i64, golden_time=f64, golden_value=i8, golden_ref=i8,
    )


def _dimensions() -> tuple[list[Dim], dict[int, int]]:
    rows = list(Dimension.objects.order_by("sort_order", "code")
                .values_list("pk", "code", "name_zh", "name_en", "category", "is_gate"))
    return ([Dim(code, zh, en, category, gate) for _, code, zh, en, category, gate in rows],
            {pk: i for i, (pk, *_rest) in enumerate(rows)})


class WorkedTasks(NamedTuple):
    """The tasks a report reads, ascending by id, as aligned columns."""

    task_id: NDArray[np.int64]
    question_id: NDArray[np.int64]
    model_name: list[str]
    golden: NDArray[np.bool_]
    overlap: NDArray[np.int64]


def worked_tasks(project: Project, version: RubricVersion, submitted_task_ids: NDArray[np.int64], *,
                 by_array: bool | None = None) -> WorkedTasks:
    """The tasks under `version` that carry any figure of the report.

    Those are the tasks with a submitted assignment (`submitted_task_ids`, already read) and
    those a judge run of the project labelled or answered: every label, adjudication,
    revision and judge verdict the report reads lies on one of them. A task nobody has
    worked on adds to no figure, so it is not read: at 100,000 tasks with a few thousand
    labelled, reading all of them (a join with the responses, 100,000 rows through the ORM)
    was most of a report's cost, and it grew with the project instead of with the work.

    On PostgreSQL the ids go in as one array, so both lookups are index scans: given the
    same ids as a subquery, the planner hashes the whole task table (29 against 3 ms at
    100,000 tasks with 2,400 worked). The embedded SQLite mode (and `by_array=False`) sends
    the subquery.
    """
    task_t, assignment_t, response_t = Task._meta.db_table, Assignment._meta.db_table, Response._meta.db_table
    run_t = JudgeRun._meta.db_table
    judged = (f"SELECT j.task_id FROM {JudgeLabel._meta.db_table} j JOIN {run_t} jr ON jr.id = j.run_id "
              f"WHERE jr.project_id = %s UNION SELECT x.task_id FROM {JudgeTaskResult._meta.db_table} x "
              f"JOIN {run_t} xr ON xr.id = x.run_id WHERE xr.project_id = %s")
    if by_array is None:
        by_array = connection.vendor == "postgresql"
    if not by_array:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT t.id, r.question_id, r.model_name, t.is_golden, t.overlap "
                f"FROM {task_t} t JOIN {response_t} r ON r.id = t.response_id "
                f"WHERE t.project_id = %s AND t.rubric_version_id = %s AND t.id IN ("
                f"SELECT a.task_id FROM {assignment_t} a WHERE a.status = %s UNION {judged}) ORDER BY t.id",
                [project.pk, version.pk, Assignment.Status.SUBMITTED, project.pk, project.pk])
            rows = cursor.fetchall()
        return WorkedTasks(np.asarray([r[0] for r in rows], np.int64), np.asarray([r[1] for r in rows], np.int64),
                           [r[2] for r in rows], np.asarray([r[3] for r in rows], bool),
                           np.asarray([r[4] for r in rows], np.int64))

    judged_ids = read_columns(f"SELECT CAST(task_id AS bigint) FROM ({judged}) AS judged",
                              [project.pk, project.pk], ["int8"])[0]
    task_id, response_id, golden, overlap = read_columns(
        f"SELECT CAST(t.id AS bigint), CAST(t.response_id AS bigint), CAST(CAST(t.is_golden AS int) AS smallint), "
        f"CAST(t.overlap AS smallint) FROM {task_t} t "
        f"WHERE t.id = ANY(CAST(%s AS bigint[])) AND t.project_id = %s AND t.rubric_version_id = %s",
        [np.union1d(submitted_task_ids, judged_ids).tolist(), project.pk, version.pk],
        ["int8", "int8", "int2", "int2"])
    order = np.argsort(task_id)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT r.id, r.question_id, r.model_name FROM {response_t} r "
                       f"WHERE r.id = ANY(CAST(%s AS bigint[]))", [np.unique(response_id).tolist()])
        responses = {pk: (question, name) for pk, question, name in cursor.fetchall()}
    of_task = [responses[pk] for pk in response_id[order].tolist()]
    return WorkedTasks(task_id[order], np.fromiter((q for q, _ in of_task), np.int64, len(of_task)),
                       [name for _, name in of_task], golden[order].astype(bool), overlap[order].astype(np.int64))


def material_load(*, project: Project, version: RubricVersion | None) -> Material:
    """Everything the report needs about `project` under `version`, as aligned arrays (a handful of queries)."""
    dims, dim_index = _dimensions()
    if version is None:
        material = _empty_material(project.overlap, dims)
        material.labels_used = str(project.consensus_labels)
        return material

    questions = list(Question.objects.filter(project=project).order_by("external_id")
                     .values_list("pk", "external_id", "difficulty"))
    question_index = {pk: i for i, (pk, _, _) in enumerate(questions)}
    difficulties = sorted({d for _, _, d in questions})
    difficulty_index = {d: i for i, d in enumerate(difficulties)}

    items = list(RubricItem.objects.filter(version=version).order_by("pk")
                 .values_list("pk", "position", "dimension_id", "score"))
    item_id = np.fromiter((i[0] for i in items), np.int64, len(items))
    item_position = np.fromiter((i[1] for i in items), np.int64, len(items))
    item_dim = np.fromiter((dim_index[i[2]] for i in items), np.int64, len(items))
    item_score = np.fromiter((np.nan if i[3] is None else i[3] for i in items), np.float64, len(items))

    label_t, assignment_t, task_t = Label._meta.db_table, Assignment._meta.db_table, Task._meta.db_table
    a_id, a_task_id, a_slot, a_expert_id, a_submitted, a_leased = read_columns(
        f"SELECT CAST(a.id AS bigint), CAST(a.task_id AS bigint), CAST(a.slot AS smallint), "
        f"CAST(a.expert_id AS bigint), {_epoch('a.submitted_at')}, {_epoch('a.leased_at')} "
        f"FROM {assignment_t} a JOIN {task_t} t ON t.id = a.task_id "
        f"WHERE t.project_id = %s AND t.rubric_version_id = %s AND a.status = %s",
        [project.pk, version.pk, Assignment.Status.SUBMITTED], ["int8", "int8", "int2", "int8", "float8", "float8"])
    worked = worked_tasks(project, version, a_task_id)
    task_id, task_golden, task_overlap = worked.task_id, worked.golden, worked.overlap
    models = sorted(set(worked.model_name))
    model_index = {name: i for i, name in enumerate(models)}
    task_question = np.fromiter((question_index[q] for q in worked.question_id.tolist()), np.int64, task_id.size)
    task_model = np.fromiter((model_index[name] for name in worked.model_name), np.int64, task_id.size)
    # The labels join only the task (for the project); their slot, expert and time come
    # from the submitted assignments above, which also drops any label of another status.
    l_assignment_id, l_item_id, l_value = read_columns(
        f"SELECT CAST(l.assignment_id AS bigint), CAST(l.rubric_item_id AS bigint), CAST(l.value AS smallint) "
        f"FROM {label_t} l JOIN {task_t} t ON t.id = l.task_id "
        f"WHERE t.project_id = %s AND t.rubric_version_id = %s",
        [project.pk, version.pk], ["int8", "int8", "int2"])

    expert_ids = np.unique(a_expert_id)
    profiles = {uid: (pseudonym, tier, status) for uid, pseudonym, tier, status in
                ExpertProfile.objects.filter(user_id__in=expert_ids.tolist())
                .values_list("user_id", "pseudonym", "tier", "status")}
    experts = [Expert(int(uid), *profiles.get(int(uid), (f"#{uid}", "", ""))) for uid in expert_ids]

    by_id = np.argsort(a_id, kind="stable")
    a_id, a_task_id, a_slot, a_expert_id = a_id[by_id], a_task_id[by_id], a_slot[by_id], a_expert_id[by_id]
    a_submitted, a_leased = a_submitted[by_id], a_leased[by_id]
    a_task, a_known = _lookup(task_id, a_task_id)
    a_expert = np.searchsorted(expert_ids, a_expert_id).astype(np.int64)
    a_slot = a_slot.astype(np.int64)

    l_assignment, assignment_known = _lookup(a_id, l_assignment_id)
    l_item, item_known = _lookup(item_id, l_item_id)
    keep = assignment_known & item_known
    l_assignment, l_item, l_value = l_assignment[keep], l_item[keep], l_value[keep]
    keep = a_known[l_assignment]
    l_assignment, l_item, l_value = l_assignment[keep], l_item[keep], l_value[keep]
    l_task, l_slot = a_task[l_assignment], a_slot[l_assignment]
    l_expert, l_time = a_expert[l_assignment], a_submitted[l_assignment]
    a_task, a_slot, a_expert = a_task[a_known], a_slot[a_known], a_expert[a_known]
    a_submitted, a_leased = a_submitted[a_known], a_leased[a_known]
    golden = task_golden[l_task]

    # A panel is `overlap` slots wide; a golden task (control work) may reach more experts
    # over time, so golden labels stay flat instead of widening every row.
    panel_slots = a_slot[~task_golden[a_task]] if a_task.size else a_slot
    n_slots = int(max(project.overlap, panel_slots.max(initial=0)))
    n_items = max(1, item_id.size)
    keys, inverse = np.unique(l_task[~golden] * n_items + l_item[~golden], return_inverse=True)
    inverse = inverse.reshape(-1)
    labels = np.full((keys.size, n_slots), -1, np.int8)
    labels[inverse, l_slot[~golden] - 1] = l_value[~golden]
    unit_task = keys // n_items

    panel = ~task_golden[a_task] & (a_slot <= n_slots)
    slot_expert = np.full((task_id.size, n_slots), -1, np.int64)
    slot_time = np.full((task_id.size, n_slots), np.nan)
    slot_expert[a_task[panel], a_slot[panel] - 1] = a_expert[panel]
    slot_time[a_task[panel], a_slot[panel] - 1] = a_submitted[panel]

    material = Material(
        n_slots=n_slots, task_id=task_id, task_question=task_question, task_model=task_model,
        task_golden=task_golden, question_ext=[q[1] for q in questions],
        question_difficulty=np.fromiter((difficulty_index[q[2]] for q in questions), np.int64, len(questions)),
        difficulties=difficulties, models=models, item_id=item_id, item_position=item_position,
        item_dim=item_dim, item_score=item_score, dims=dims, experts=experts,
        a_task=a_task, a_expert=a_expert, a_submitted=a_submitted, a_leased=a_leased,
        unit_task=unit_task, unit_item=keys % n_items, labels=labels,
        unit_expert=slot_expert[unit_task], unit_time=slot_time[unit_task],
        golden_task=l_task[golden], golden_item=l_item[golden], golden_expert=l_expert[golden],
        golden_time=l_time[golden], golden_value=l_value[golden].astype(np.int8),
        golden_ref=np.full(int(golden.sum()), -1, np.int8), task_overlap=task_overlap,
    )
    material.golden_ref = _golden_ref(material, golden_reference_matrix(project))
    material.adjudicated = adjudication_vector(material, project=project, version=version)
    # First or revised labels (the project's choice), and the revised cells for "before and after the reveal".
    revisions_apply(material, project=project, version=version)
    return material


def adjudication_vector(m: Material, *, project: Project, version: RubricVersion) -> NDArray[np.int8]:
    """Each unit's consultation verdict: -1 none, 0/1 the adjudicated label, 2 "item is ambiguous"."""
    adj_t, task_t = Adjudication._meta.db_table, Task._meta.db_table
    r_task_id, r_item_id, r_value = read_columns(
        f"SELECT CAST(j.task_id AS bigint), CAST(j.rubric_item_id AS bigint), "
        f"CAST(CASE WHEN j.ambiguous THEN 2 ELSE j.value END AS smallint) "
        f"FROM {adj_t} j JOIN {task_t} t ON t.id = j.task_id "
        f"WHERE t.project_id = %s AND t.rubric_version_id = %s",
        [project.pk, version.pk], ["int8", "int8", "int2"])
    out = np.full(m.unit_task.size, -1, np.int8)
    if out.size == 0 or r_task_id.size == 0:
        return out
    n_items = max(1, m.item_id.size)
    r_task, task_known = _lookup(m.task_id, r_task_id)
    r_item, item_known = _lookup(m.item_id, r_item_id)
    keep = task_known & item_known
    pos, found = _lookup(m.unit_task * n_items + m.unit_item, r_task[keep] * n_items + r_item[keep])
    out[pos[found]] = r_value[keep][found]
    return out


def _golden_ref(m: Material, ref: GoldenReference) -> NDArray[np.int8]:
    """The reference label of each golden label cell, -1 where the task/item has none."""
    out = np.full(m.golden_task.size, -1, np.int8)
    if ref.task_id.size == 0 or m.golden_task.size == 0:
        return out
    n_items = max(1, m.item_id.size)
    r_task, r_task_known = _lookup(m.task_id, ref.task_id)
    r_item, r_item_known = _lookup(m.item_id, ref.rubric_item_id)
    known = r_task_known & r_item_known
    r_keys = r_task[known] * n_items + r_item[known]
    order = np.argsort(r_keys)
    pos, found = _lookup(r_keys[order], m.golden_task * n_items + m.golden_item)
    out[found] = ref.value[known][order][pos[found]]
    return out


def judge_vector(m: Material, run: JudgeRun) -> NDArray[np.int8]:
    """The run's label on each unit of the material, -1 where the judge said nothing."""
    j_task_id, j_item_id, j_value = read_columns(
        f"SELECT CAST(j.task_id AS bigint), CAST(j.rubric_item_id AS bigint), CAST(j.value AS smallint) "
        f"FROM {JudgeLabel._meta.db_table} j WHERE j.run_id = %s",
        [run.pk], ["int8", "int8", "int2"])
    out = np.full(m.unit_task.size, -1, np.int8)
    if out.size == 0 or j_task_id.size == 0:
        return out
    n_items = max(1, m.item_id.size)
    j_task, task_known = _lookup(m.task_id, j_task_id)
    j_item, item_known = _lookup(m.item_id, j_item_id)
    keep = task_known & item_known
    unit_keys = m.unit_task * n_items + m.unit_item  # ascending by construction
    pos, found = _lookup(unit_keys, j_task[keep] * n_items + j_item[keep])
    out[pos[found]] = j_value[keep][found]
    return out


def judged_units(m: Material, run: JudgeRun, version: RubricVersion | None) -> JudgedUnits:
    """Every unit of a regular task of the material's version that `run` answered in full (see `JudgedUnits`).

    In full: the run labelled every item of the task's question. A task with a failed
    result, or with only some items labelled, is a failed call.
    """
    empty = JudgedUnits(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int8),
                        np.zeros(m.task_id.size, bool))
    if version is None or m.task_id.size == 0:
        return empty
    j_task_id, j_item_id, j_value = read_columns(
        f"SELECT CAST(j.task_id AS bigint), CAST(j.rubric_item_id AS bigint), CAST(j.value AS smallint) "
        f"FROM {JudgeLabel._meta.db_table} j WHERE j.run_id = %s",
        [run.pk], ["int8", "int8", "int2"])
    j_task, task_known = _lookup(m.task_id, j_task_id)
    j_item, item_known = _lookup(m.item_id, j_item_id)
    keep = task_known & item_known
    j_task, j_item, j_value = j_task[keep], j_item[keep], j_value[keep]
    keep = ~m.task_golden[j_task]
    j_task, j_item, j_value = j_task[keep], j_item[keep], j_value[keep]
    # Items each task's question has under this version.
    question_of = {ext: i for i, ext in enumerate(m.question_ext)}
    per_question = np.zeros(len(m.question_ext), np.int64)
    for ref, count in (RubricItem.objects.filter(version=version).values_list("question_ref")
                       .annotate(n=models.Count("pk")).values_list("question_ref", "n")):
        if ref in question_of:
            per_question[question_of[ref]] = count
    expected = per_question[m.task_question]
    labelled = np.bincount(j_task, minlength=m.task_id.size)
    full = (labelled > 0) & (labelled >= expected)
    # Each failed task has a result row, so it is among the material's tasks (`worked_tasks`); the
    # project and version come by a join, not a list of 40,000 ids for the driver to splice into the SQL.
    failed_ids = set(JudgeTaskResult.objects.filter(run=run, status=JudgeTaskResult.Status.FAILED,
                                                    task__project_id=run.project_id, task__rubric_version=version,
                                                    task__is_golden=False)
                     .values_list("task_id", flat=True))
    failed = ((labelled > 0) & ~full) | np.isin(m.task_id, list(failed_ids))
    use = full[j_task] & ~failed[j_task]
    # An item a consultation found ambiguous is out of every score, the judge's own included.
    ambiguous = list(Adjudication.objects.filter(task__project_id=run.project_id, task__rubric_version=version,
                                                 ambiguous=True).values_list("task_id", "rubric_item_id"))
    if ambiguous:
        n_items = max(1, m.item_id.size)
        a_task, a_task_known = _lookup(m.task_id, np.array([t for t, _ in ambiguous], np.int64))
        a_item, a_item_known = _lookup(m.item_id, np.array([i for _, i in ambiguous], np.int64))
        known = a_task_known & a_item_known
        use &= ~np.isin(j_task * n_items + j_item, a_task[known] * n_items + a_item[known])
    order = np.lexsort((j_item[use], j_task[use]))
    return JudgedUnits(unit_task=j_task[use][order].astype(np.int64), unit_item=j_item[use][order].astype(np.int64),
                       value=j_value[use][order].astype(np.int8), failed=failed & ~m.task_golden)


# ------------------------------------------------------------------------- report


def report_params(project: Project) -> Params:
    """Report knobs: settings, with the project's own drift margin where it has one."""
    margin = getattr(project, "drift_margin", None)
    return Params(
        n_boot=int(getattr(settings, "RUBRICA_AGREEMENT_BOOTSTRAP", 1000)),
        seed=int(getattr(settings, "RUBRICA_AGREEMENT_SEED", 0)),
        drift_window=int(getattr(settings, "RUBRICA_DRIFT_WINDOW", 100)),
        drift_baseline=int(getattr(settings, "RUBRICA_DRIFT_BASELINE", 200)),
        drift_margin=float(margin if margin is not None else getattr(settings, "RUBRICA_DRIFT_MARGIN", 0.10)),
        drift_alpha=getattr(settings, "RUBRICA_DRIFT_ALPHA", 0.05),
        tz=timezone.get_default_timezone(),
    )


def report_payload(*, project: Project, version: RubricVersion | None, run: JudgeRun | None,
                   material: Material, params: Params, now: Any) -> dict[str, Any]:
    """The JSON-ready report: identification, parameters, dimension names and every section."""
    # Only the judge changes between runs; the per-unit lookups cached in `derived` do not.
    material.judge = judge_vector(material, run) if run is not None else None
    material.judged = judged_units(material, run, version) if run is not None else None
    sections = report_sections(material, params)
    if sections["judge"] is not None:
        _add_item_texts(sections["judge"]["unanimous_disagreements"]["items"])
    return {
        "schema": SCHEMA,
        "project_id": project.pk,
        "rubric_version": None if version is None else {"id": version.pk, "number": version.number},
        "judge_run": None if run is None else {"id": run.pk, "name": run.name, "judge_model": run.judge_model,
                                               "source": run.source, "status": run.status},
        "computed_at": now.isoformat(),
        "params": {"n_boot": params.n_boot, "seed": params.seed, "alpha": params.alpha,
                   "bootstrap_cluster": "question", "drift_window": params.drift_window,
                   "drift_baseline": params.drift_baseline, "drift_margin": params.drift_margin,
                   "drift_alpha": params.drift_alpha,
                   "majority": "hit when more than half of the panel says hit",
                   "agreement_interval": "cluster_wilson", "thin_dialogues": THIN_DIALOGUES,
                   "headline_excludes_gate": True},
        # Which expert labels every figure below read: "first" (as submitted) or "revised" (after the reveal).
        "labels_used": material.labels_used,
        "reveal": reveal_section(material, params),
        "dimensions": [{"code": d.code, "name_zh": d.name_zh, "name_en": d.name_en, "category": d.category,
                        "is_gate": d.is_gate} for d in material.dims],
        **sections,
    }


def _add_item_texts(rows: list[dict[str, Any]]) -> None:
    """Item keys and criterion texts for the listed rows only (one small query)."""
    texts = {pk: (key, content) for pk, key, content in
             RubricItem.objects.filter(pk__in=[r["rubric_item_id"] for r in rows])
             .values_list("pk", "item_key", "content")}
    for r in rows:
        key, content = texts.get(r["rubric_item_id"], ("", ""))
        r["item_key"] = key
        r["content"] = content[:CONTENT_CHARS]
