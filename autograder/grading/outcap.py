"""The graded kernel's launcher: ipykernel, with each cell's stream output capped at the source.

``python -m autograder.grading.outcap CHARS -f CONNECTION_FILE`` starts the same kernel as
``python -m ipykernel_launcher -f CONNECTION_FILE``, except that a cell's ``stdout`` and
``stderr`` (Python's ``print`` and, through ipykernel's file-descriptor watcher, C-level
writes) stop being *sent* after ``CHARS`` characters per stream: the rest is dropped in the
kernel, and one line says so. Printing 400 MB then costs the kernel only building the
strings, so the cell ends in a time that does not depend on how fast the grader reads, and
the grade does not depend on the machine's load. The grader's own limits (``LimitOutputSize``,
nbclient's wait for output) stay in place behind this for a kernel that gets around it: this
runs in the student's process, so it is a courtesy to the student, not a guarantee.

>>> cap = _Cap(10)
>>> [cap.take("m1", "x" * 6), cap.take("m1", "x" * 6), cap.take("m1", "x"), cap.take("m2", "y")]
['xxxxxx', 'xxxx\\n[course-grade: output cut in the kernel after 10 characters]\\n', '', 'y']
"""

from __future__ import annotations

import os
import sys
import threading

NOTE = "\n[course-grade: output cut in the kernel after {cap} characters]\n"
# imported, before it answers, by a kernel started ahead (``sandbox/prestart.py`` sets
# ``COURSE_KERNEL_IMPORTS``; once ipykernel has set matplotlib's inline backend): it spends the
# seconds of the setup cell's ``import torch`` while the previous notebook runs. Nothing is
# bound in the notebook's namespace. A kernel started as its notebook comes imports nothing
# ahead (a notebook that needs no torch would pay for it).
PREIMPORT = ("numpy", "torch", "matplotlib.pyplot")
IMPORTS_VAR = "COURSE_KERNEL_IMPORTS"


class _Cap:
    """Characters left for the current request (cell), per stream; a new request resets it."""

    def __init__(self, cap: int):
        self.cap, self.request, self.sent = cap, None, 0
        self.lock = threading.Lock()

    def take(self, request, text: str) -> str:
        """The part of ``text`` that may still be sent for ``request`` ('' once cut)."""
        with self.lock:
            if request != self.request:
                self.request, self.sent = request, 0
            if self.sent > self.cap:
                return ""
            room = self.cap - self.sent
            if len(text) <= room:
                self.sent += len(text)
                return text
            self.sent = self.cap + 1  # cut: the note once, then nothing
            return text[:room] + NOTE.format(cap=self.cap)


def install(cap: int) -> None:
    """Cap every ``OutStream`` (stdout, stderr) of ipykernel at ``cap`` characters per cell."""
    from ipykernel.iostream import OutStream

    original = OutStream.write
    caps: dict[int, _Cap] = {}

    def write(self, string):
        if not isinstance(string, str):
            return original(self, string)  # ipykernel's own TypeError
        request = (self.parent_header or {}).get("msg_id")
        kept = caps.setdefault(id(self), _Cap(cap)).take(request, string)
        if kept:
            original(self, kept)
        return len(string)

    OutStream.write = write


def main(argv: list[str]) -> None:
    if not argv or not argv[0].isdigit():
        sys.exit("usage: python -m autograder.grading.outcap CHARS -f CONNECTION_FILE")
    install(int(argv[0]))
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]  # as ipykernel_launcher: the kernel puts the notebook's folder back
    from ipykernel import kernelapp

    sys.argv = [sys.argv[0], *argv[1:]]
    app = kernelapp.IPKernelApp.instance()  # ipykernel's launch_new_instance, in its steps
    app.initialize()
    if IMPORTS_VAR in os.environ:  # a kernel started ahead
        preimport()
    app.start()


def preimport() -> None:
    """Import :data:`PREIMPORT` and the modules ``COURSE_KERNEL_IMPORTS`` names (comma-separated,
    may be empty: the exercise table's ``kernel_imports`` of the notebook; a module that fails
    to import is left to the notebook)."""
    import importlib

    extra = [m for m in os.environ.pop(IMPORTS_VAR, "").split(",") if m]
    for name in (*PREIMPORT, *extra):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - the notebook's own import reports it
            continue


if __name__ == "__main__":
    main(sys.argv[1:])
