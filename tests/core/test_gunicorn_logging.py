"""The web process's access log (core/gunicorn_logging.py) writes the lines gunicorn's own logger writes."""
import datetime
import http.client
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from gunicorn import glogging
from gunicorn.config import Config

from core.gunicorn_logging import LeanLogger, _Atoms

ROOT = Path(__file__).resolve().parents[2]
# Every kind of atom: the request line and its parts, sizes, times, the process, request and response
# headers (names in any case, one repeated, one missing), environ variables, an unknown atom.
EVERY_ATOM = ('%(h)s %(l)s %(u)s "%(r)s" %(s)s %(m)s %(U)s %(q)s %(H)s %(b)s %(B)s "%(f)s" "%(a)s" %(T)s %(D)s '
              '%(M)s %(L)s %(p)s %({x-request-id}i)s %({X-Forwarded-For}I)s %({x-missing}i)s %({Content-Type}o)s '
              '%({x-request-id}o)s %({remote_port}e)s %({wsgi.url_scheme}e)s %(Z)s %({odd}x)s')


def _request(*, status="201 Created", sent=512, user_agent='curl/8 "quoted"', auth="Basic ZXhwZXJ0OnNlY3JldA=="):
    headers = [("HOST", "127.0.0.1:8000"), ("X-REQUEST-ID", "first"), ("X-REQUEST-ID", "second"),
               ("X-FORWARDED-FOR", "203.0.113.9"), ("USER-AGENT", user_agent)]
    environ = {"REMOTE_ADDR": "127.0.0.1", "REMOTE_PORT": "53211", "REQUEST_METHOD": "POST",
               "RAW_URI": "/api/v1/assignments/7/submit/?x=1", "PATH_INFO": "/api/v1/assignments/7/submit/",
               "QUERY_STRING": "x=1", "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_USER_AGENT": user_agent,
               "HTTP_REFERER": "http://127.0.0.1:8000/annotate/", "HTTP_AUTHORIZATION": auth,
               "wsgi.url_scheme": "https"}
    resp = SimpleNamespace(status=status, sent=sent,
                           headers=[("Content-Type", "application/json"), ("X-Request-ID", "second")])
    return resp, SimpleNamespace(headers=headers), environ, datetime.timedelta(seconds=1, microseconds=23456)


@pytest.fixture
def frozen_clock(monkeypatch):
    monkeypatch.setattr(glogging.Logger, "now", lambda self: "[06/Dec/2026:21:00:00 +0000]")


@pytest.mark.parametrize("form", [Config().access_log_format, EVERY_ATOM])
@pytest.mark.parametrize("request_kind", ["basic auth", "token, no size"])
def test_every_atom_reads_as_gunicorn_gives_it(frozen_clock, form, request_kind):
    if request_kind == "basic auth":
        resp, req, environ, elapsed = _request()
    else:
        resp, req, environ, elapsed = _request(status=200, sent=None, auth="Token abc")
    logger = LeanLogger(Config())

    line = form % _Atoms(logger, resp, req, environ, elapsed)

    assert line == form % glogging.SafeAtoms(glogging.Logger(Config()).atoms(resp, req, environ, elapsed))
    assert '\\"quoted\\"' in line  # the user agent's quotes escaped, as gunicorn escapes them


def test_the_access_log_gets_the_line_of_each_request_through_the_deployed_configuration(tmp_path):
    """gunicorn as deployed (platform/gunicorn.conf.py) with the lean logger: one line a request, the default format."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "access.log"
    env = {**os.environ, "GUNICORN_BIND": f"127.0.0.1:{port}", "GUNICORN_WORKERS": "1", "PYTHONPATH": str(ROOT)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "platform/gunicorn.conf.py",
                               "tests.support.pid_app:application", "--access-logfile", str(log),
                               "--log-level", "warning"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            # The standard library's client on the loopback server it started (no proxy from the environment).
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            try:
                connection.request("GET", "/probe?n=1",
                                   headers={"User-Agent": "probe/1", "Referer": f"http://127.0.0.1:{port}/"})
                body = connection.getresponse().read()
                break
            except OSError:
                time.sleep(0.1)
            finally:
                connection.close()
        for _ in range(50):
            if log.exists() and log.read_text().strip():
                break
            time.sleep(0.1)
    finally:
        server.terminate()
        server.wait(timeout=30)

    lines = log.read_text().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("127.0.0.1 - - [")
    assert lines[0].endswith(f'"GET /probe?n=1 HTTP/1.1" 200 {len(body)} "http://127.0.0.1:{port}/" "probe/1"')
