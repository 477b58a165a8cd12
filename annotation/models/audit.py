"""The audit log: who changed what, when, in which project, from which request. Append-only."""
from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class AuditAction(models.TextChoices):
    QUESTIONS_IMPORT = "questions.import", _("Questions imported")
    RESPONSES_IMPORT = "responses.import", _("Responses imported")
    GOLDEN_IMPORT = "golden.import", _("Golden answers imported")
    JUDGE_LABELS_IMPORT = "judge_labels.import", _("Judge labels imported")
    RUBRIC_PUBLISH = "rubric.publish", _("Rubric version published")
    SETTINGS_CHANGE = "settings.change", _("Project settings changed")
    PROJECT_STATE = "project.state", _("Project paused, resumed, closed or archived")
    MEMBER_ADD = "member.add", _("Member added")
    MEMBER_REMOVE = "member.remove", _("Member removed")
    SUBMISSION_REJECT = "submission.reject", _("Submission rejected")
    CONSULTATION_RESOLVE = "consultation.resolve", _("Consultation resolved")
    PRICE_CHANGE = "price.change", _("Prices or payment settings changed")
    PERIOD_SETTLE = "period.settle", _("Period settled")
    PAYOUT_APPROVE = "payout.approve", _("Payout batch approved")
    PAYOUT_PAID = "payout.paid", _("Payout batch marked paid")
    EXPORT = "export", _("Dataset exported")
    JUDGE_RUN_START = "judge_run.start", _("Judge run started")
    PERMISSION_CHANGE = "permission.change", _("Permissions changed")
    WEBHOOK_CREATE = "webhook.create", _("Webhook endpoint registered")
    WEBHOOK_DISABLE = "webhook.disable", _("Webhook endpoint disabled")
    WEBHOOK_RESEND = "webhook.resend", _("Webhook message resent")
    BATCH_GOLDEN = "batch.golden", _("Tasks marked golden")
    BATCH_OVERLAP = "batch.overlap", _("Overlap raised on tasks")
    TASK_PRIORITY = "task.priority", _("Task priority set")
    ASSIGN_BY_HAND = "assign.by_hand", _("Tasks assigned by hand")
    LEASES_HAND_OVER = "leases.hand_over", _("Leases handed over")
    EXPERT_PAUSE = "expert.pause", _("Experts paused")
    EXPERT_RESUME = "expert.resume", _("Experts resumed")
    REVIEW_ACCEPT = "review.accept", _("Flagged submission accepted")
    REVIEW_RETURN = "review.return", _("Submission returned to the expert")
    BLIND_TEST_CREATE = "blind_test.create", _("Blind-test sample drawn")
    CONVERGENCE_TARGETS = "convergence.targets", _("Judge convergence targets changed")
    APPEAL_ACCEPT = "appeal.accept", _("Appeal accepted")
    APPEAL_DENY = "appeal.deny", _("Appeal denied")
    INVITATION_CREATE = "invitation.create", _("Invitation link created")
    INVITATION_REVOKE = "invitation.revoke", _("Invitation link withdrawn")
    PROJECT_CREATE = "project.create", _("Project created")
    PROJECT_CLONE = "project.clone", _("Project cloned")
    CASE_PUBLISH = "case.publish", _("Library case published")
    CASE_UNPUBLISH = "case.unpublish", _("Library case taken back to draft")
    JUDGE_CONFIG_CREATE = "judge_config.create", _("Judge configuration created")
    JUDGE_CONFIG_EDIT = "judge_config.edit", _("Judge configuration edited")
    RUBRIC_ITEM_ADD = "rubric_item.add", _("Rubric item added to the draft")
    RUBRIC_ITEM_EDIT = "rubric_item.edit", _("Rubric item edited in the draft")
    RUBRIC_ITEM_DELETE = "rubric_item.delete", _("Rubric item removed from the draft")
    RUBRIC_GUIDELINES_EDIT = "rubric_guidelines.edit", _("Draft guidelines edited")
    CONSULTATION_OPEN = "consultation.open", _("Consultation opened by a PM")
    BATCH_REJECT = "batch.reject", _("Submissions rejected in a batch")


class AuditEntry(models.Model):
    """One change a PM or an admin made. The database refuses UPDATE and DELETE on this table
    (annotation/migrations/0022), so an entry, once written with its change, stays as written."""

    at = models.DateTimeField(db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                              related_name="+")
    action = models.CharField(max_length=32, choices=AuditAction.choices)
    project = models.ForeignKey("annotation.Project", on_delete=models.PROTECT, null=True, blank=True,
                                related_name="+")
    object_type = models.CharField(max_length=64, blank=True)
    object_ids = models.JSONField(default=list)
    details = models.JSONField(default=dict)
    request_id = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["project", "-at"], name="audit_project_at_idx"),
            models.Index(fields=["actor", "-at"], name="audit_actor_at_idx"),
            models.Index(fields=["action", "-at"], name="audit_action_at_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.action} by {self.actor_id} on {self.object_type} {self.object_ids}"
