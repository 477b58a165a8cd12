from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        from core import checks  # noqa: F401  (registers the system checks)
        from core import outbox  # noqa: F401  (marks outbox rows done as tasks finish)
