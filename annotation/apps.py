from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = _("Annotation")

    def ready(self) -> None:
        # Register the Celery tasks in every process (not only workers), so a task sent
        # by name from a web request runs eagerly in the embedded mode.
        from annotation import tasks  # noqa: F401
