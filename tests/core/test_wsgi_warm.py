"""The WSGI application is warm before it serves (config/wsgi.py): the URL modules are imported and
`reverse`'s table is built for every language, in the process gunicorn forks its workers from."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import config.wsgi
from django.conf import settings
from django.urls import get_resolver, reverse
from django.utils import translation
import django.urls.resolvers as resolvers

built = sorted(get_resolver()._reverse_dict)
walks = []
populate = resolvers.URLResolver._populate
resolvers.URLResolver._populate = lambda self: (walks.append(1), populate(self))[1]
for code, _name in settings.LANGUAGES:
    with translation.override(code):
        reverse("consultation_detail", args=[1])
print(" ".join(built), len(walks))
"""


def test_reverse_is_ready_in_every_language_before_the_first_request():
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"})
    assert result.returncode == 0, result.stderr[-2000:]
    *languages, walks = result.stdout.split()
    assert languages == ["en", "zh-hans"]
    assert walks == "0"  # no request walks the URL patterns again
