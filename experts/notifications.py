"""Notifications: sending them, showing them in the reader's language, marking them read.

A notification stores its `kind` and `params`; pages render the text for the reader's
language from the templates below, and `message` keeps the English text for the admin
and the API. Higher apps call `notification_send`; nothing here knows about projects.
"""
from collections.abc import Iterable
from datetime import datetime

from django.db.models import QuerySet
from django.utils import translation
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from experts.models import Notification, Tier, User
from experts.tier_reasons import tier_reason_text

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
    "consultation_vote": _("You are asked to vote on item %(item)s of question %(question)s in “%(project)s”: "
                           "cast your blind vote with a short reason by %(deadline)s."),
    "consultation_revealed": _("The blind votes on item %(item)s of question %(question)s in “%(project)s” are "
                               "revealed: the discussion is open."),
    "consultation_resolved": _("The consultation on item %(item)s of question %(question)s in “%(project)s” is "
                               "resolved: %(outcome)s."),
    "mention": _("%(author)s mentioned you in the consultation on item %(item)s of question %(question)s: "
                 "“%(excerpt)s”"),
}
# Consultation outcomes (a code in `outcome`), shown in the reader's language.
OUTCOMES = {"hit": _("hit"), "miss": _("miss"), "ambiguous": _("the item is ambiguous")}
# Params that hold a tier code, shown as the tier's name in the reader's language.
TIER_PARAMS = ("from_tier", "to_tier")


def _render(kind: str, params: dict) -> str:
    values = dict(params)
    for key in TIER_PARAMS:
        if key in values and values[key] in Tier.values:
            values[key] = Tier(values[key]).label
    if values.get("outcome") in OUTCOMES:
        values["outcome"] = OUTCOMES[values["outcome"]]
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


def notification_send(*, users: Iterable[User], kind: str, params: dict, now: datetime,
                      link: str = "") -> int:
    """Write one notification of `kind` to each of `users`; returns how many were written."""
    with translation.override("en"):
        message = _render(kind, params)
    rows = [Notification(user=user, kind=kind, message=message, params=params, link=link, created_at=now)
            for user in users]
    Notification.objects.bulk_create(rows)
    return len(rows)


def notification_list_for_user(user: User) -> QuerySet[Notification]:
    return Notification.objects.filter(user=user)


def notification_unread_count(user: User) -> int:
    return Notification.objects.filter(user=user, read_at__isnull=True).count()


def notifications_mark_read(*, user: User, now: datetime) -> int:
    """Mark every unread notification of `user` read; returns how many changed."""
    return Notification.objects.filter(user=user, read_at__isnull=True).update(read_at=now)
