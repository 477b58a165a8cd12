"""`manage.py healthcheck`: the checks of `/healthz` for a process that serves no HTTP (the Celery worker's
readiness probe, platform/k8s/worker.yaml). Prints what was checked as JSON; exits 1 when anything failed."""
import json
import sys
from typing import Any

from django.core.management.base import BaseCommand

from core.health import health_check


class Command(BaseCommand):
    help = "Check that the database and Redis answer, as /healthz does; exit 1 when one does not."

    def handle(self, *args: Any, **options: Any) -> None:
        healthy, body = health_check()
        self.stdout.write(json.dumps(body, sort_keys=True))
        if not healthy:
            sys.exit(1)
