from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = _("Annotation")

    def ready(self) -> None:
        # Register the Celery tasks in every process (not only workers), so a task sent
        # by name from a web request runs eagerly in the embedded mode.
        from annotation import tasks  # noqa: F401
        from annotation.metrics import leases_open_count
        from core.metrics import gauge_source_register

        gauge_source_register(name="rubrica_leases_open", documentation="Task leases held now (not expired).",
                              read=leases_open_count)
