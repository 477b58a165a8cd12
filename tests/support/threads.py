"""Racing the same call from several threads against the real database, each on its own connection."""
import threading
from collections.abc import Callable
from typing import Any

from django.db import connections


def run_together(call: Callable[[], Any], count: int) -> list[Any]:
    """Run `call` in `count` threads released at once (a barrier); their results, in finishing order.

    Each thread closes its database connections when done, as a request's end would. An exception
    in a thread is raised here, after every thread finished.
    """
    start = threading.Barrier(count)
    results: list[Any] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def one() -> None:
        try:
            start.wait()
            result = call()
            with lock:
                results.append(result)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            with lock:
                errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results
