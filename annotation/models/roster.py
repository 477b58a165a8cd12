"""The roster's records: who joined or left a project, when and by whom, and invitation links."""
from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from experts.models import Role


class MembershipEvent(models.Model):
    """One add or removal of a project member. Append-only: rows are written, never changed.

    Membership itself is the guardian object permission (`annotation.permissions`); this is
    its history, so that "who put this person in, and when" has an answer after they left.
    """

    class Action(models.TextChoices):
        ADDED = "added", _("Added")
        REMOVED = "removed", _("Removed")

    class Via(models.TextChoices):
        PAGE = "page", _("Members page")
        API = "api", _("API")
        CLI = "cli", _("Command line")
        INVITATION = "invitation", _("Invitation link")

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="membership_events")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    role = models.CharField(max_length=10, choices=Role.choices)
    action = models.CharField(max_length=10, choices=Action.choices)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                           related_name="+")
    via = models.CharField(max_length=12, choices=Via.choices)
    at = models.DateTimeField()

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["project", "user", "-at"], name="membership_event_project_user")]

    def __str__(self) -> str:
        return f"{self.action} {self.user_id} in project {self.project_id} at {self.at:%Y-%m-%d %H:%M}"


class Invitation(models.Model):
    """A link that adds whoever opens it to a project, as an expert or a PM, a limited number of times.

    The token is 32 random bytes (urlsafe base64), unique; a use is counted under the row's
    lock (`annotation.lock_objects.invitation_lock`), and the database refuses a count over
    the maximum, so two people racing for the last use cannot both join.
    """

    class InvitedRole(models.TextChoices):
        EXPERT = Role.EXPERT.value, _("Expert")
        PM = Role.PM.value, _("Project manager")

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="invitations")
    token = models.CharField(max_length=64, unique=True)
    role = models.CharField(max_length=10, choices=InvitedRole.choices, default=InvitedRole.EXPERT)
    expires_at = models.DateTimeField()
    max_uses = models.PositiveIntegerField(default=1)
    use_count = models.PositiveIntegerField(default=0)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(condition=Q(max_uses__gte=1), name="invitation_max_uses_positive"),
            models.CheckConstraint(condition=Q(use_count__lte=F("max_uses")), name="invitation_uses_within_max"),
            models.CheckConstraint(condition=Q(role__in=["expert", "pm"]), name="invitation_role_member"),
        ]

    def __str__(self) -> str:
        return f"invitation {self.pk} to project {self.project_id} ({self.role}, {self.use_count}/{self.max_uses})"
