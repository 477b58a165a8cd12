"""Dataset exports: one row per export, streamed or built as a file by a worker."""
import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class ExportJob(models.Model):
    """One export of a project's dataset: who asked, with which filters, how many rows, where the file is.

    Every export writes one: a streamed download (`delivery=stream`, no file) as well as a
    file a worker builds (`delivery=file`). `snapshot_id` names the export in the file
    itself (dataset card, response header), so a dataset found later can be traced back here;
    `db_snapshot` is the database state its rows were read from (one consistent read).
    """

    class Status(models.TextChoices):
        PENDING = "pending", _("Waiting for a worker")
        RUNNING = "running", _("Building")
        DONE = "done", _("Ready")
        FAILED = "failed", _("Failed")

    class Delivery(models.TextChoices):
        STREAM = "stream", _("Streamed download")
        FILE = "file", _("File")

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="export_jobs")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    fmt = models.CharField(max_length=16)
    filters = models.JSONField(default=dict)
    delivery = models.CharField(max_length=8, choices=Delivery.choices, default=Delivery.FILE)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    row_count = models.PositiveIntegerField(null=True, blank=True)
    snapshot_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # The database snapshot the rows were read in (PostgreSQL `pg_current_snapshot()`), once read.
    db_snapshot = models.CharField(max_length=200, blank=True)
    file_path = models.CharField(max_length=500, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "owner", "-created_at"], name="export_job_owner_idx")]
        constraints = [
            models.CheckConstraint(condition=Q(progress_done__lte=models.F("progress_total")),
                                   name="export_job_progress_range"),
        ]

    def __str__(self) -> str:
        return f"export {self.snapshot_id} ({self.fmt}, {self.status})"
