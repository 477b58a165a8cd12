"""LLM judge runs (imported or live) and the labels they produced."""
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class JudgeRun(models.Model):
    """One judge's pass over a project's tasks under one rubric version."""

    class Source(models.TextChoices):
        IMPORTED = "imported", _("Imported")
        LIVE = "live", _("Live")

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        RUNNING = "running", _("Running")
        CANCELLED = "cancelled", _("Cancelled")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="judge_runs")
    rubric_version = models.ForeignKey("rubrics.RubricVersion", on_delete=models.PROTECT, related_name="judge_runs")
    name = models.CharField(max_length=100)
    judge_model = models.CharField(max_length=200, blank=True)
    prompt_version = models.CharField(max_length=100, blank=True)
    # The judge configuration version the run was asked with (imported runs: the one the PM named, if any).
    config_version = models.ForeignKey("annotation.JudgeConfigVersion", on_delete=models.PROTECT, null=True,
                                       blank=True, related_name="runs")
    source = models.CharField(max_length=10, choices=Source.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    base_url = models.URLField(max_length=500, blank=True)
    # The key is stored encrypted (Fernet, keyed from RUBRICA_SECRETS_KEY: core.secret_box) or named by an environment
    # variable; it is never rendered back to anyone.
    api_key_encrypted = models.TextField(blank=True)
    api_key_env = models.CharField(max_length=100, blank=True)
    requests_per_second = models.FloatField(default=2.0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="judge_run_name_unique"),
            models.CheckConstraint(condition=Q(requests_per_second__gt=0), name="judge_run_rps_positive"),
            models.CheckConstraint(condition=Q(requests_per_second__lte=50), name="judge_run_rps_max"),
        ]

    def __str__(self) -> str:
        return f"judge run {self.name} ({self.status})"


class JudgeTaskResult(models.Model):
    """The outcome of asking the judge about one task: done, failed (with why), or pending."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")
        # The task's question changed in a later rubric version the run was carried to:
        # what the judge said (or would say) was about wording that no longer holds.
        SUPERSEDED = "superseded", _("Superseded by a rubric change")

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="results")
    task = models.ForeignKey("annotation.Task", on_delete=models.CASCADE, related_name="judge_results")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    # What kind of failure (annotation.judging.client.JudgeRequestError.error_class, or
    # unparseable_answer / key / bad_rubric / internal) and the endpoint's last HTTP status:
    # shown to the PM in place of anything the endpoint answered.
    error_class = models.CharField(max_length=40, blank=True)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    reason = models.TextField(blank=True)
    # A worker that takes a pending result up holds it until this moment, so two workers
    # never ask the judge about the same task; a crashed worker's claim simply runs out.
    claimed_until = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "task"], name="judge_result_one_per_task")]
        indexes = [models.Index(fields=["run", "status"], name="judge_result_run_status_idx")]

    def __str__(self) -> str:
        return f"judge result task {self.task_id} ({self.status})"


class JudgeKeyGrant(models.Model):
    """An admin's leave for one project's judge runs to read their key from an environment variable.

    Only admins start runs with such a key, and only on a project that holds a grant for
    that variable (which must also be in the operator's RUBRICA_JUDGE_KEY_ENV_ALLOWED);
    a PM types the key in. Edited in the Django admin only; deleting a grant stops the
    runs that use it at their next request.
    """

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="judge_key_grants")
    env_name = models.CharField(max_length=100)
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    granted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "env_name"], name="judge_key_grant_unique")]

    def __str__(self) -> str:
        return f"judge key {self.env_name} for project {self.project_id}"


class JudgeLabel(models.Model):
    """The judge's hit (1) or miss (0) on one rubric item of one task."""

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="labels")
    task = models.ForeignKey("annotation.Task", on_delete=models.CASCADE, related_name="judge_labels")
    rubric_item = models.ForeignKey("rubrics.RubricItem", on_delete=models.PROTECT, related_name="judge_labels")
    value = models.PositiveSmallIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "task", "rubric_item"], name="judge_label_one_per_item"),
            models.CheckConstraint(condition=Q(value__in=[0, 1]), name="judge_label_value_binary"),
        ]

    def __str__(self) -> str:
        return f"judge {self.value} on item {self.rubric_item_id} (task {self.task_id})"


class AgreementReport(models.Model):
    """A stored agreement report: the dashboard reads these, never raw labels."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        RUNNING = "running", _("Running")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="agreement_reports")
    rubric_version = models.ForeignKey("rubrics.RubricVersion", on_delete=models.CASCADE, null=True, blank=True,
                                       related_name="+")
    judge_run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, null=True, blank=True, related_name="reports")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    requested_at = models.DateTimeField()
    computed_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    units = models.PositiveIntegerField(default=0)
    payload = models.JSONField(default=dict)
    error = models.TextField(blank=True)
    # The Celery task id of the delivery computing it: a redelivery of that message after its
    # worker died may claim the running row again (annotation.agreement.services).
    claimed_by = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["-requested_at"]
        indexes = [models.Index(fields=["project", "status", "-computed_at"], name="agreement_latest_idx")]

    def __str__(self) -> str:
        return f"agreement report {self.pk} ({self.status})"
