"""The web process as deployed (platform/gunicorn.conf.py) spreads kept-alive connections over its workers,
and the balance never waits for a worker that is gone (core/gunicorn_worker.py)."""
import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core import gunicorn_worker

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 4


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def served():
    """gunicorn with the deployed configuration and 4 workers, serving an application that names its process."""
    port = _free_port()
    env = {**os.environ, "GUNICORN_BIND": f"127.0.0.1:{port}", "GUNICORN_WORKERS": str(WORKERS),
           "PYTHONPATH": str(ROOT)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "platform/gunicorn.conf.py",
                               "tests.support.pid_app:application", "--log-level", "warning"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        children = Path(f"/proc/{server.pid}/task/{server.pid}/children")
        for _ in range(300):
            if len(children.read_text().split()) == WORKERS:
                break
            time.sleep(0.1)
        time.sleep(2)  # each worker past its start, waiting on the socket
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def _clients_together(port: int, clients: int, requests: int) -> list[set[str]]:
    """`clients` connections opened at once, each kept alive for `requests` requests: the processes each one met."""
    start = threading.Barrier(clients)
    met: list[set[str]] = []
    lock = threading.Lock()

    def one() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        pids = set()
        start.wait()
        for _ in range(requests):
            connection.request("GET", "/")
            pids.add(connection.getresponse().read().decode())
        connection.close()
        with lock:
            met.append(pids)

    threads = [threading.Thread(target=one) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return met


def test_as_many_clients_as_workers_each_get_a_worker_of_their_own_every_time(served):
    # Left to chance (gunicorn's own gthread worker), 3 of 8 benchmark warm-ups put two or three of the
    # four connections in one process, and this test failed 3 runs of 3.
    for _round in range(6):
        met = _clients_together(served, WORKERS, requests=5)
        assert all(len(pids) == 1 for pids in met)  # a kept-alive connection stays with its worker
        assert len(set().union(*met)) == WORKERS
        time.sleep(0.5)  # the workers see the connections close


def test_twice_as_many_clients_as_workers_get_two_to_a_worker(served):
    met = _clients_together(served, 2 * WORKERS, requests=5)
    counts: dict[str, int] = {}
    for pids in met:
        (pid,) = pids
        counts[pid] = counts.get(pid, 0) + 1
    assert sorted(counts.values()) == [2] * WORKERS


@pytest.fixture
def slots():
    taken: list[int] = []
    yield taken
    for pid in taken:
        gunicorn_worker.slot_release(pid)


def test_a_worker_waits_for_a_peer_holding_fewer_connections_but_not_for_one_that_stopped_looking(slots):
    me, peer = 10**9 + 1, 10**9 + 2  # the entries' owners (no process is asked about them)
    slots += [me, peer]
    mine, theirs = gunicorn_worker.slot_take(me), gunicorn_worker.slot_take(peer)
    assert mine is not None and theirs is not None and mine != theirs
    gunicorn_worker.connections_publish(theirs, 1)
    assert gunicorn_worker.peer_holds_fewer(mine, 2)
    assert not gunicorn_worker.peer_holds_fewer(mine, 1)  # as many: both accept
    # The peer's loop has not turned for longer than a worker's ever takes (it died, or hangs).
    gunicorn_worker._LOOKED[theirs] = time.monotonic() - gunicorn_worker.STALE_S - 1
    assert not gunicorn_worker.peer_holds_fewer(mine, 2)
    # Its entry goes to the next worker to start, with the count reset.
    newcomer = 10**9 + 3
    slots.append(newcomer)
    assert gunicorn_worker.slot_take(newcomer) == theirs
    assert gunicorn_worker._CONNECTIONS[theirs] == 0
    # A worker that exits frees its entry.
    gunicorn_worker.slot_release(newcomer)
    assert gunicorn_worker._PIDS[theirs] == 0


class _Tmp:
    def notify(self) -> None:
        pass


class _Poller:
    def __init__(self) -> None:
        self.registered: list[object] = []

    def register(self, sock, *_args) -> None:
        self.registered.append(sock)

    def unregister(self, sock) -> None:
        self.registered.remove(sock)


def _worker(*, alive: bool) -> gunicorn_worker.BalancedThreadWorker:
    """A worker as its loop sees itself, without a master or sockets of its own (nothing is forked)."""
    worker = object.__new__(gunicorn_worker.BalancedThreadWorker)
    listener = socket.socket()
    worker.__dict__.update(alive=alive, nr_conns=1, worker_connections=1000, _accepting=False, sockets=[listener],
                           poller=_Poller(), tmp=_Tmp(), balance_slot=None)
    return worker


def test_a_running_worker_with_room_listens_and_a_stopping_one_never_listens_again():
    running, stopping = _worker(alive=True), _worker(alive=False)
    try:
        running.notify()
        stopping.notify()  # gunicorn's graceful stop keeps calling it while the last connections finish
        assert running._accepting and running.poller.registered == running.sockets
        assert not stopping._accepting and stopping.poller.registered == []
    finally:
        for worker in (running, stopping):
            worker.sockets[0].close()
