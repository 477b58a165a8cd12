"""A Celery worker that loads the project first and starts when told (a line on stdin).

Loading Django and every task module is most of a worker's start-up (10 s on a busy
machine); a fault test warms the worker that replaces the one it kills while the first
one works, so the restart is quick. Arguments are the worker's command line.
"""
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from config.celery import app  # noqa: E402

app.loader.import_default_modules()
if sys.stdin.readline().strip() == "go":
    app.worker_main(["worker", *sys.argv[1:]])
