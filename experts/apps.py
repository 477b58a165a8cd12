from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ExpertsConfig(AppConfig):
    name = "experts"
    verbose_name = _("Experts")

    def ready(self) -> None:
        # Register the tasks in every process, not only in workers: `notification_send` sends
        # "experts.notification_email_send" by name, and in the embedded mode (eager Celery) a
        # task the process does not know would go to the broker and wait there for no one.
        from experts import tasks  # noqa: F401
