"""A real loopback HTTP server that records what it receives and answers from a script.

Used by the outbound-client and webhook tests on the hooks port range (8680-8689):
`responses` is a list of (status, headers) answers taken in order, the last one
repeating; every request is kept in `received` as (method, path, headers, body).
"""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORTS = range(8680, 8690)


class Receiver:
    def __init__(self) -> None:
        self.responses: list[tuple[int, dict[str, str]]] = [(200, {})]
        self.received: list[tuple[str, str, dict[str, str], bytes]] = []
        self.body = b"ok"
        self._lock = threading.Lock()
        self._server = self._bind()
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _bind(self) -> ThreadingHTTPServer:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with receiver._lock:
                    receiver.received.append((self.command, self.path, dict(self.headers.items()), body))
                    index = min(len(receiver.received), len(receiver.responses)) - 1
                    status, headers = receiver.responses[index]
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(receiver.body)))
                self.end_headers()
                self.wfile.write(receiver.body)

            do_GET = do_POST = _answer  # noqa: N815

            def log_message(self, format, *args):  # noqa: A002
                pass

        for port in PORTS:
            try:
                server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
            except OSError:
                continue
            server.daemon_threads = True
            return server
        raise RuntimeError("no free port in the hooks range 8680-8689")

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
