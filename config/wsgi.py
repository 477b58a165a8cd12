"""WSGI entry point (gunicorn); it refuses to serve with unsafe keys (core.checks)."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from core.checks import startup_refuse_unsafe  # noqa: E402  (needs the apps loaded above)

startup_refuse_unsafe()
