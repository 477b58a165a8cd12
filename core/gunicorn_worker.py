"""gunicorn's threaded worker, with the kept-alive connections spread evenly over the worker processes.

Every gthread worker waits on the one listening socket, and whichever wakes first accepts. A client
that keeps its connection alive (a browser, a proxy's pool of upstream connections, an API script)
stays with the process that accepted it, so a few busy connections can land on one process: with 4
clients on 4 workers, 3 of 8 benchmark warm-ups put 3 (or 2) of the 4 connections in one process
(`ss -tnp`). Python runs one thread of a process at a time, so those clients then share one core's
worth of Python while the other core idles, and their requests wait in turn.

`BalancedThreadWorker` accepts a connection only while no live peer holds fewer: each process
publishes how many connections it holds in a small array that gunicorn's master creates before it
forks the workers, and stops listening while a peer holds fewer (the socket stays open and the
kernel keeps a new connection in the backlog for that peer). The process holding the fewest always
listens, so a connection never waits for a worker. Each process also stamps its entry every time
its loop turns (at least once a second): an entry not stamped for `STALE_S` (a process that died
before the master freed it, or one stuck) is not waited for, and the next worker to start takes it
over. The master frees a dead worker's entry at once (`child_exit` in platform/gunicorn.conf.py).

Written here, not taken from a library: gunicorn has no such option (`reuse_port` only sets the flag
on the master's one socket), and this is a few lines over its own worker.
"""
import ctypes
import multiprocessing
import os
import time
from typing import Any

from gunicorn.workers.gthread import ThreadWorker

# More than any configuration runs (2 workers a core by default); a worker past it does not balance.
SLOTS = 256
_FREE = 0
# A worker's loop turns at least once a second (gunicorn waits for events with a 1 s timeout).
STALE_S = 5.0
# Created when the master imports this module (gunicorn reads `worker_class` before it forks):
# every worker shares them. A slot holds a worker's process id, how many connections it holds, and
# when it last looked (time.monotonic(): one clock for every process of the machine).
_PIDS = multiprocessing.RawArray(ctypes.c_long, SLOTS)
_CONNECTIONS = multiprocessing.RawArray(ctypes.c_long, SLOTS)
_LOOKED = multiprocessing.RawArray(ctypes.c_double, SLOTS)


def slot_take(pid: int) -> int | None:
    """The slot of the process `pid` from now on: a free one, or a stale one. None if all are taken."""
    now = time.monotonic()
    for slot in range(SLOTS):
        if _PIDS[slot] == _FREE or now - _LOOKED[slot] > STALE_S:
            _CONNECTIONS[slot] = 0
            _LOOKED[slot] = now
            _PIDS[slot] = pid
            return slot
    return None


def slot_release(pid: int) -> None:
    """Free the slot of the process `pid` (it exits)."""
    for slot in range(SLOTS):
        if _PIDS[slot] == pid:
            _PIDS[slot] = _FREE
            _CONNECTIONS[slot] = 0


def connections_publish(slot: int, count: int) -> None:
    """The worker in `slot` holds `count` connections, as of now."""
    _CONNECTIONS[slot] = count
    _LOOKED[slot] = time.monotonic()


def peer_holds_fewer(slot: int, count: int) -> bool:
    """Whether a worker other than the one in `slot`, seen within `STALE_S`, holds fewer than `count` connections."""
    now = time.monotonic()
    for other in range(SLOTS):
        if (other != slot and _PIDS[other] != _FREE and _CONNECTIONS[other] < count
                and now - _LOOKED[other] <= STALE_S):
            return True
    return False


class BalancedThreadWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn ships no type information
    """A gthread worker that leaves a new connection to a peer holding fewer (see the module docstring)."""

    balance_slot: int | None = None

    def init_process(self) -> None:
        self.balance_slot = slot_take(os.getpid())
        super().init_process()

    def _balanced(self) -> bool:
        if self.balance_slot is None:
            return True
        connections_publish(self.balance_slot, self.nr_conns)
        return not peer_holds_fewer(self.balance_slot, self.nr_conns)

    def set_accept_enabled(self, enabled: bool) -> None:
        super().set_accept_enabled(enabled and self._balanced())

    def notify(self) -> None:
        # The worker's loop calls this after every batch of events, and at least once a second; the
        # loop itself calls `set_accept_enabled` only when the room it has left changes. A stopping
        # worker calls it too while its last connections finish: it must not listen again then.
        if self.alive:
            self.set_accept_enabled(self.nr_conns < self.worker_connections)
        super().notify()

    def accept(self, listener: Any) -> None:
        super().accept(listener)
        # At once, not at the loop's next turn: a peer deciding meanwhile sees the new count.
        if self.balance_slot is not None:
            connections_publish(self.balance_slot, self.nr_conns)

    def run(self) -> None:
        try:
            super().run()
        finally:
            slot_release(os.getpid())
