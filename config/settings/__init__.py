"""Settings, split by concern; every value comes from the environment with an embedded default.

With no environment at all this is the embedded mode of `make run`: SQLite, tasks run
in-process, local-memory cache.
"""
from .base import *  # noqa: F401,F403
from .integrations import *  # noqa: F401,F403
from .security import *  # noqa: F401,F403
