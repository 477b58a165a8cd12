"""A PM's confirmed batch operation on a project: what it was asked to do, and what it did.

Every confirmed batch on tasks writes one row, keyed by the confirmation's token, so a second
post of the same confirmation (a double click, a reload) finds the first and acts no more. A
small set is applied in the request that confirms it; a large one is queued and applied by a
worker, in one transaction, while the page polls its progress.
"""
from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class BatchJob(models.Model):
    class Op(models.TextChoices):
        GOLDEN = "golden", _("Mark golden")
        OVERLAP = "overlap", _("Raise overlap")
        PRIORITY = "priority", _("Set priority")
        ASSIGN = "assign", _("Assign by hand")
        REJECT = "reject", _("Reject submissions")

    class Status(models.TextChoices):
        QUEUED = "queued", _("Waiting for a worker")
        DONE = "done", _("Done")
        FAILED = "failed", _("Nothing was changed")

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="batch_jobs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    token = models.CharField(max_length=64)
    op = models.CharField(max_length=16, choices=Op.choices)
    # The task filter's fields, the value (overlap, priority) and the named experts' ids.
    params = models.JSONField(default=dict)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0)
    changed = models.PositiveIntegerField(null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    error_params = models.JSONField(default=dict)
    error_message = models.TextField(blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["created_by", "token"], name="batch_job_token_unique")]
        indexes = [models.Index(fields=["project", "-created_at"], name="batch_job_project_idx")]

    def __str__(self) -> str:
        return f"batch {self.op} on project {self.project_id} ({self.status})"
