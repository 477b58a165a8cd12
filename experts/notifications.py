"""Notifications: sending them, showing them in the reader's language, marking them read.

A notification stores its `kind` and `params`; pages render the text for the reader's
language from the templates below, and `message` keeps the English text for the admin
and the API. Higher apps call `notification_send`; nothing here knows about projects. A new kind needs
only a template here (and its `Notification.Kind`): the header badge, the list, the
email preference and the email itself work for every kind in `TEMPLATES`.

When the reader opted in to email for the kind (`NotificationPreference`) and has an
address, the notification is written with `email_status="pending"` and the Celery task
`experts.notification_email_send` is sent on commit (see `experts.notification_email`).
"""
from collections.abc import Iterable
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import QuerySet
from django.utils import translation
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from psycopg.types.json import Jsonb

from core.after_commit import task_send_on_commit
from core.errors import NotFound
from core.sql_insert import insert_parts, insert_rows
from experts.models import Notification, NotificationPreference, Tier, User
from experts.tier_reasons import tier_reason_text

# Params every template may use: `project` (the project's name). Kind by kind:
#   rubric_published       version, reason (the changelog); sent only to experts who must calibrate again
#   expert_paused          expert, accuracy, window, threshold (to the project's PMs)
#   account_paused         (project only)
#   task_superseded        version
#   tier_changed           from_tier, to_tier (tier codes), reason / reason_code + reason_params
#   statement_issued       period (e.g. "2026-11-23 – 2026-11-30"), payable, currency, count (entries)
#   submission_rejected    question (external id), reason_label (an English label, see TRANSLATED_PARAMS),
#                          text (the PM's words)
#   submission_returned    question (external id), text (the PM's comment); the link opens the task
#   lease_expiring         question, minutes (left on the lease)
#   expert_idle            days (idle), count (tasks open to them)
#   quality_alert          expert, signal (an English label, see TRANSLATED_PARAMS), value (e.g. "62% → 48%");
#                          to the project's PMs
#   deadline_risk          forecast, due (dates), remaining (items), rate (items a day); to the project's PMs
#   mention                author (who wrote), question, item (rubric item key), excerpt
#   consultation_vote      question, item, deadline (a formatted date and time)
#   consultation_revealed  question, item
#   consultation_resolved  question, item, outcome ("hit", "miss" or "ambiguous", see OUTCOMES)
#   faq_asked              question (the text of the new FAQ question; sent to the project's PMs)
#   faq_answered           question (the text of the FAQ question)
#   appeal_decided         project, outcome ("accepted" or "denied", translated when shown), reason
#   judge_drift            run, earlier (judge run names), share (e.g. "12.5%"), shared (units both labelled),
#                          threshold (e.g. "10%"); to the project's PMs
TEMPLATES = {
    "rubric_published": _("Rubric version %(version)s of “%(project)s” is published (%(reason)s). "
                          "Please calibrate again before your next task."),
    "expert_paused": _("%(expert)s was paused automatically in “%(project)s”: accuracy %(accuracy)s%% on the "
                       "last %(window)s control tasks is below %(threshold)s%%."),
    "account_paused": _("Your expert account was paused after a quality check in “%(project)s”. "
                        "Your project manager has been told and will get in touch."),
    "task_superseded": _("Rubric version %(version)s of “%(project)s” changed the items of a task you held, "
                         "so that lease has ended; your draft is kept and new tasks use the new version."),
    "tier_changed": _("Your tier changed from %(from_tier)s to %(to_tier)s: %(reason)s"),
    "statement_issued": _("Your statement for “%(project)s”, %(period)s, is issued: %(payable)s %(currency)s "
                          "payable for %(count)s entries."),
    "submission_rejected": _("Your submission on question %(question)s in “%(project)s” was rejected "
                             "(%(reason_label)s). The project manager wrote: %(text)s"),
    "submission_returned": _("Your submission on question %(question)s in “%(project)s” was returned to you to "
                             "fix, once. The project manager wrote: %(text)s"),
    "lease_expiring": _("Your lease of question %(question)s in “%(project)s” ends in %(minutes)s minutes: "
                        "submit it, or open it and keep working."),
    "expert_idle": _("You have not worked in “%(project)s” for %(days)s days; %(count)s tasks are waiting."),
    "quality_alert": _("Quality alert for %(expert)s in “%(project)s”: %(signal)s (%(value)s)."),
    "deadline_risk": _("“%(project)s” is forecast to finish on %(forecast)s, after its due date %(due)s: "
                       "%(remaining)s items left at %(rate)s a day over the last 7 days."),
    "appeal_decided": _("Your appeal in “%(project)s” was %(outcome)s: %(reason)s"),
    "faq_asked": _("A new question in “%(project)s” waits for an answer: “%(question)s”"),
    "faq_answered": _("Your question in “%(project)s” has an answer: “%(question)s”"),
    "consultation_vote": _("You are asked to vote on item %(item)s of question %(question)s in “%(project)s”: "
                           "cast your blind vote with a short reason by %(deadline)s."),
    "consultation_revealed": _("The blind votes on item %(item)s of question %(question)s in “%(project)s” are "
                               "revealed: the discussion is open."),
    "consultation_resolved": _("The consultation on item %(item)s of question %(question)s in “%(project)s” is "
                               "resolved: %(outcome)s."),
    "judge_drift": _("Judge run %(run)s in “%(project)s” labels %(share)s of the %(shared)s units it shares with "
                     "run %(earlier)s differently (more than the %(threshold)s threshold): compare the two runs "
                     "before trusting the new figures."),
    "mention": _("%(author)s mentioned you in the consultation on item %(item)s of question %(question)s: "
                 "“%(excerpt)s”"),
}
# Consultation outcomes (a code in `outcome`), shown in the reader's language.
OUTCOMES = {"hit": _("hit"), "miss": _("miss"), "ambiguous": _("the item is ambiguous")}
# The outcome of an appeal, shown in the reader's language.
APPEAL_OUTCOMES = {"accepted": _("accepted"), "denied": _("denied")}
# Params that hold a tier code, shown as the tier's name in the reader's language.
TIER_PARAMS = ("from_tier", "to_tier")
# Params that hold an English label with a translation in the catalogue (a choice's label):
# stored in English, shown in the reader's language.
TRANSLATED_PARAMS = ("reason_label", "outcome", "decision", "signal")
# Kinds only a project's managers receive; experts are not offered email for them.
MANAGER_KINDS = frozenset({"expert_paused", "faq_asked", "quality_alert", "deadline_risk", "judge_drift"})

# The users notified during the current request (set by `experts.middleware`), so that an
# htmx response can tell the page to refresh its badge.
notified_users: ContextVar[set[int] | None] = ContextVar("notified_users", default=None)


def _render(kind: str, params: dict) -> str:
    values = dict(params)
    for key in TIER_PARAMS:
        if key in values and values[key] in Tier.values:
            values[key] = Tier(values[key]).label
    if kind == "appeal_decided" and values.get("outcome") in APPEAL_OUTCOMES:
        values["outcome"] = APPEAL_OUTCOMES[values["outcome"]]
    elif values.get("outcome") in OUTCOMES:
        values["outcome"] = OUTCOMES[values["outcome"]]
    for key in TRANSLATED_PARAMS:
        if isinstance(values.get(key), str) and values[key]:
            values[key] = gettext(values[key])
    if kind == "tier_changed" and values.get("reason_code"):
        values["reason"] = tier_reason_text(code=values["reason_code"], params=values.get("reason_params") or {},
                                            fallback=values.get("reason", ""))
    return gettext(TEMPLATES[kind]) % values


def notification_text(notification: Notification) -> str:
    """The notification in the active language; the stored English text for kinds without a template."""
    if notification.kind in TEMPLATES:
        try:
            return _render(notification.kind, notification.params)
        except (KeyError, TypeError, ValueError):
            pass
    return notification.message


def kind_label(kind: str) -> str:
    """The kind's name in the active language (its code for a kind without a label)."""
    return str(Notification.Kind(kind).label) if kind in Notification.Kind.values else kind


def notification_send(*, users: Iterable[User], kind: str, params: dict, now: datetime,
                      link: str = "") -> int:
    """Write one notification of `kind` to each of `users`; returns how many were written.

    Readers who opted in to email for `kind` and have an address get it by email too, by a
    Celery task sent when the caller's transaction commits (never inside the request).
    """
    return notifications_send_many(kind=kind, now=now, batch=[([user.pk for user in users], params, link)])


# Of these users, who asked for this kind by email and has an address (the embedded SQLite's path).
def _emailed(user_ids: set[int], kind: str) -> set[int]:
    return set(NotificationPreference.objects.filter(user__in=user_ids, kind=kind, email=True)
               .exclude(user__email="").values_list("user_id", flat=True))


# On PostgreSQL the rows are written in one statement that also decides, row by row, which are emailed
# (the reader asked for the kind by email and has an address): no read of the preferences of its own.
# The rows come as one JSON parameter; the other columns are the template row's (`insert_parts`).
_EMAILED_CASE = """CASE WHEN EXISTS (SELECT 1 FROM {preference} p JOIN {user} u ON u.id = p.user_id
    WHERE p.user_id = x.user_id AND p.kind = x.kind AND p.email AND u.email <> '') THEN '{pending}' ELSE '{none}' END"""
_INSERT_SQL = """INSERT INTO {table} ({columns}) SELECT {values}
    FROM jsonb_to_recordset(%s) AS x(user_id bigint, kind text, message text, params jsonb, link text)
    RETURNING id, email_status"""


def _insert_deciding_email(kind: str, now: datetime, rows: list[dict]) -> list[tuple[int, str]]:
    """Write `rows` ({user_id, message, params, link}) as notifications of `kind`; (id, email status) of each."""
    emailed = _EMAILED_CASE.format(preference=NotificationPreference._meta.db_table, user=User._meta.db_table,
                                   pending=Notification.EmailStatus.PENDING.value,
                                   none=Notification.EmailStatus.NONE.value)
    template = Notification(kind=kind, message="", params={}, link="", created_at=now)
    columns, values, params = insert_parts(template, computed={
        "user_id": "x.user_id", "message": "x.message", "params": "x.params", "link": "x.link",
        "email_status": emailed})
    sql = _INSERT_SQL.format(table=Notification._meta.db_table, columns=", ".join(columns), values=", ".join(values))
    with connection.cursor() as cursor:
        bound: list[Any] = [*params, Jsonb([{**row, "kind": kind} for row in rows])]
        cursor.execute(sql, bound)
        return cursor.fetchall()


def notifications_send_many(*, kind: str, now: datetime, batch: list[tuple[list[int], dict, str]]) -> int:
    """`notification_send` for several (user ids, params, link) at once, in one statement on PostgreSQL
    (a submission that opens consultations on several items notifies each item's panel)."""
    everyone = {user_id for user_ids, _params, _link in batch for user_id in user_ids}
    if not everyone:
        return 0
    with translation.override("en"):
        messages = [_render(kind, params) for _user_ids, params, _link in batch]
    if connection.vendor == "postgresql":
        written = _insert_deciding_email(kind, now, [
            {"user_id": user_id, "message": message, "params": params, "link": link}
            for (user_ids, params, link), message in zip(batch, messages, strict=True) for user_id in user_ids])
    else:
        emailed = _emailed(everyone, kind)
        pending, none = Notification.EmailStatus.PENDING, Notification.EmailStatus.NONE
        rows = [Notification(user_id=user_id, kind=kind, message=message, params=params, link=link, created_at=now,
                             email_status=pending if user_id in emailed else none)
                for (user_ids, params, link), message in zip(batch, messages, strict=True) for user_id in user_ids]
        # The ids are read back only for the emails to send.
        insert_rows(rows, returning=bool(emailed))
        written = [(row.pk, row.email_status) for row in rows]
    for pk, status in written:
        if status == Notification.EmailStatus.PENDING:
            task_send_on_commit("experts.notification_email_send", notification_id=pk)
    notified = notified_users.get()
    if notified is not None:
        notified.update(everyone)
    return len(written)


def notification_list_for_user(user: User) -> QuerySet[Notification]:
    return Notification.objects.filter(user=user)


def notification_get_for_user(user: User, notification_id) -> Notification:
    """One of `user`'s notifications, or NotFound (also for another user's)."""
    try:
        return Notification.objects.get(pk=int(notification_id), user=user)
    except (Notification.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such notification.") from None


def notification_unread_count(user: User) -> int:
    return Notification.objects.filter(user=user, read_at__isnull=True).count()


def notification_mark_read(*, user: User, notification_id, now: datetime) -> Notification:
    """Mark one of `user`'s notifications read (a read one keeps its time); NotFound for another's."""
    notification = notification_get_for_user(user, notification_id)
    if notification.read_at is None:
        Notification.objects.filter(pk=notification.pk, read_at__isnull=True).update(read_at=now)
        notification.read_at = now
    return notification


def notifications_mark_read(*, user: User, now: datetime) -> int:
    """Mark every unread notification of `user` read; returns how many changed."""
    return Notification.objects.filter(user=user, read_at__isnull=True).update(read_at=now)
