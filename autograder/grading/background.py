"""``head_start(fn, name)``: run ``fn`` in a daemon thread, for the work that only saves time.

course-grade loads what it will need later (nbgrader's gradebook code, the trusted checks,
the report's matplotlib) while it waits on students' kernels. Nothing depends on the thread:
what fails there is done again, and reported, where it is needed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


def head_start(fn: Callable[[], object], name: str) -> threading.Thread:
    """Start ``fn()`` in a daemon thread named ``name``, its errors ignored; return the thread."""

    def run():
        try:
            fn()
        except BaseException:  # noqa: BLE001, S110 - only a head start (see the module)
            pass

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread
