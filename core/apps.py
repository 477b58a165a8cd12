from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        # The system checks register themselves; the outbox marks its rows done as tasks finish.
        from core import checks, outbox  # noqa: F401
