"""A WSGI application that answers each request with the id of the process serving it (the gunicorn tests)."""
import os
import time


def application(environ, start_response):
    # A little work, as a real request does, so that workers are busy while connections arrive.
    started = time.perf_counter()
    while time.perf_counter() - started < 0.005:
        pass
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
