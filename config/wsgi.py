"""WSGI entry point (gunicorn); it refuses to serve with unsafe keys (core.checks).

It also resolves the URL configuration (which imports every view) before serving, so no worker's
first request pays for it: with `preload_app` (platform/gunicorn.conf.py) that is once, in the
master, and a worker recycled after its `max_requests` starts warm. Then the objects loaded so far
are set aside from the garbage collector (`core.gc_tuning`).
"""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from core.checks import startup_refuse_unsafe  # noqa: E402  (needs the apps loaded above)
from core.gc_tuning import gc_tune  # noqa: E402

startup_refuse_unsafe()


def _warm() -> None:
    from django.conf import settings
    from django.conf.urls.i18n import is_language_prefix_patterns_used
    from django.urls import get_resolver
    from django.utils import translation

    resolver = get_resolver()
    resolver.url_patterns  # noqa: B018 - imports the URL modules and their views
    is_language_prefix_patterns_used(settings.ROOT_URLCONF)  # what LocaleMiddleware asks first
    # `reverse` builds its table once per language, walking every pattern (73 resolvers, tens of ms):
    # built here, a worker's first link in each language (a consultation's notice) is not that slow.
    for code, _name in settings.LANGUAGES:
        with translation.override(code):
            resolver.reverse_dict  # noqa: B018


_warm()
gc_tune()
