"""The graded kernel's launcher: ipykernel, with each cell's stream and rich output capped at
the source and C-level output kept with the cell that wrote it.

``python -m autograder.grading.sandbox.outcap CHARS -f CONNECTION_FILE`` starts the same kernel as
``python -m ipykernel_launcher -f CONNECTION_FILE``, except for three things.

A cell's ``stdout`` and ``stderr`` (``print`` and C-level writes) stop being *sent* after
``CHARS`` characters per stream, with one line saying so: printing 400 MB costs the kernel only
building the strings, so the cell's time does not depend on how fast the grader reads. The
grader's own limits stay behind this: it runs in the student's process, a courtesy, not a
guarantee.

A cell's rich outputs (``display_data``, ``update_display_data``, ``execute_result``) share a
budget of the same ``CHARS``, counted before encoding (the MIME bundle, its metadata, and
:data:`MESSAGE_CHARS` a message). An output that fits is sent whole; the first that does not
becomes the note, and nothing more of the cell's is sent. A probe record (:data:`RECORD_MIME`)
is always sent whole and never counted: the grade is in it. (Six 64 MB displays once left a
whole notebook ungraded: "Timeout waiting for IOPub output".)

C-level output (fds 1 and 2) is sent as output of the cell that wrote it. ipykernel's watcher
thread sends what it reads as output of the cell running *when it gets to run*: on a loaded
machine, the line PyTorch's profiler writes at the end of each test cell reached the next
cell, or was dropped. Here the watcher sends each chunk under a lock, and at each cell's end
(``post_execute``) the main thread sends, under the same lock, what the pipes still hold.

>>> cap = _Cap(10)
>>> [cap.take("m1", "x" * 6), cap.take("m1", "x" * 6), cap.take("m1", "x"), cap.take("m2", "y")]
['xxxxxx', 'xxxx\\n[course-grade: output cut in the kernel after 10 characters]\\n', '', 'y']
>>> [cap.admit("m3", 6), cap.admit("m3", 5), cap.admit("m3", 1), cap.admit("m4", 10)]
[True, False, None, True]
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import sys
import termios
import threading

from ..record import RECORD_MIME

NOTE = "\n[course-grade: output cut in the kernel after {cap} characters]\n"
MESSAGE_CHARS = 500  # what one rich output costs besides its data: about its headers' size
CHUNK = 65536  # bytes read from a watched pipe at a time
# seconds the end of a cell waits for a chunk the watcher is sending (microseconds of work,
# unless its thread is not scheduled; then the rest goes to the next cell, as in ipykernel)
LOCK_WAIT = 2.0


class _Cap:
    """Characters left for the current request (cell), of one stream or of the cell's rich
    outputs; a new request resets it."""

    def __init__(self, cap: int):
        self.cap, self.request, self.sent = cap, None, 0
        self.lock = threading.Lock()

    def _start(self, request) -> None:  # under the lock
        if request != self.request:
            self.request, self.sent = request, 0

    def take(self, request, text: str) -> str:
        """The part of ``text`` that may still be sent for ``request`` ('' once cut)."""
        with self.lock:
            self._start(request)
            if self.sent > self.cap:
                return ""
            room = self.cap - self.sent
            if len(text) <= room:
                self.sent += len(text)
                return text
            self.sent = self.cap + 1  # cut: the note once, then nothing
            return text[:room] + NOTE.format(cap=self.cap)

    def admit(self, request, size) -> bool | None:
        """Whether an output that is sent whole or not at all may still be sent for
        ``request``: True (counted), False the first time it may not (send the note instead),
        None after that (send nothing). ``size``: its size, or a function that returns it
        given what is left (it may stop counting past that)."""
        with self.lock:
            self._start(request)
            if self.sent > self.cap:
                return None
            room = self.cap - self.sent
            if callable(size):
                size = size(room)
            if size <= room:
                self.sent += size
                return True
            self.sent = self.cap + 1
            return False


def _size(value, limit: int) -> int:
    """About the characters ``value`` (JSON-like) sends as JSON, counted only until past
    ``limit`` (at most about ``limit / 2`` steps, whatever ``value`` holds, a cycle too).

    >>> _size({"text/html": "<b>x</b>", "image/png": b"12345"}, 100)
    41
    >>> _size({"a": ["x" * 1000] * 1000}, 50) > 50, _size([[]] * 10**6, 50) > 50
    (True, True)
    """
    total, todo = 0, [value]
    while todo and total <= limit:
        item = todo.pop()
        if isinstance(item, (str, bytes, bytearray)):
            total += len(item) + 2
        elif isinstance(item, memoryview):
            total += item.nbytes + 2
        elif isinstance(item, (dict, list, tuple)):
            if 2 * len(item) > limit:  # each item at least 2: past the limit in any case
                return limit + 1
            total += 2
            todo.extend(item.keys() if isinstance(item, dict) else item)
            if isinstance(item, dict):
                todo.extend(item.values())
        else:
            total += 8
    return total


def install(cap: int) -> None:
    """Cap every ``OutStream`` (stdout, stderr) of ipykernel at ``cap`` characters per cell,
    make its file-descriptor watcher :func:`_watch` (before ipykernel starts it), and cap the
    cell's rich outputs (:func:`install_rich`)."""
    install_rich(cap)
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
    redirect = OutStream._setup_stream_redirects

    def setup(self, name):  # ipykernel's, which starts the watcher thread
        self._course_lock = threading.Lock()
        redirect(self, name)
        _WATCHED.append(self)

    OutStream._setup_stream_redirects = setup
    OutStream._watch_pipe_fd = _watch


def _is_record(data) -> bool:
    return isinstance(data, dict) and RECORD_MIME in data


def install_rich(cap: int) -> None:
    """Cap the rich outputs of each cell at ``cap`` characters together (module docstring):
    ipykernel's ``ZMQDisplayPublisher.publish`` and ``ZMQShellDisplayHook.write_format_data``.
    """
    from ipykernel.displayhook import ZMQShellDisplayHook
    from ipykernel.zmqshell import ZMQDisplayPublisher

    budget = _Cap(cap)
    note = {"text/plain": NOTE.format(cap=cap).strip("\n")}

    def admit(owner, *parts) -> bool | None:
        request = (owner.parent_header or {}).get("msg_id")
        return budget.admit(request, lambda room: MESSAGE_CHARS + _size(parts, room))

    publish = ZMQDisplayPublisher.publish

    def capped_publish(self, data, metadata=None, **kwargs):
        if not isinstance(data, dict) or _is_record(data):  # ipykernel's own error, a record
            return publish(self, data, metadata, **kwargs)
        sent = admit(self, data, metadata, kwargs.get("transient"))
        if sent:
            return publish(self, data, metadata, **kwargs)
        if sent is False:  # a display of its own, whatever this one was to update
            return publish(self, dict(note), {})
        return None

    ZMQDisplayPublisher.publish = capped_publish
    write = ZMQShellDisplayHook.write_format_data

    def capped_write(self, format_dict, md_dict=None):
        if _is_record(format_dict):
            return write(self, format_dict, md_dict)
        sent = admit(self, format_dict, md_dict)
        if sent:
            return write(self, format_dict, md_dict)
        # the note as the cell's result, else no data: finish_displayhook sends nothing
        return write(self, dict(note) if sent is False else {}, {})

    ZMQShellDisplayHook.write_format_data = capped_write


_WATCHED: list = []  # the OutStreams whose file descriptor is watched (stdout, stderr)


def _forward(stream, size: int) -> int | None:
    """Read up to ``size`` bytes of ``stream``'s pipe and send them as ipykernel's watcher
    does, under the caller's lock. The bytes read (0: empty), None when the watcher stops."""
    try:
        data = os.read(stream._fid, size)
    except BlockingIOError:
        return 0
    if not data or not stream._should_watch:
        return None
    stream.write(data.decode(errors="replace"))
    os.write(stream._original_stdstream_copy, data)
    return len(data)


def _watch(self) -> None:
    """ipykernel's ``OutStream._watch_pipe_fd``, except that each chunk is read and sent
    under the stream's lock (which :func:`flush_fd_output` takes at each cell's end)."""
    if self._fid is None:
        return
    try:
        os.set_blocking(self._fid, False)
        poll = select.poll()
        poll.register(self._fid, select.POLLIN)
        while self._should_watch:
            poll.poll()
            with self._course_lock:
                if _forward(self, CHUNK) is None:
                    return
    except Exception:  # noqa: BLE001 - as ipykernel's: kept, printed when the stream closes
        self._exc = sys.exc_info()


def _pending(fd: int) -> int:
    """The bytes the pipe ``fd`` holds now (else as many as a pipe can hold: read until empty)."""
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
    except OSError:
        return 2**20


def flush_fd_output() -> None:
    """IPython's ``post_execute``: send what the watched pipes hold now as this cell's output,
    under each stream's lock, then flush. Never raises (it would show in the student's cell).
    """
    for stream in _WATCHED:
        try:
            if not stream._course_lock.acquire(timeout=LOCK_WAIT):
                continue
            sent = 0
            try:
                left = _pending(stream._fid)
                while left > 0:
                    n = _forward(stream, min(left, CHUNK))
                    if not n:
                        break
                    left, sent = left - n, sent + n
            finally:
                stream._course_lock.release()
            if sent or stream not in (sys.stdout, sys.stderr):  # else the kernel flushes it
                stream.flush()
        except Exception:  # noqa: BLE001, S112 - a courtesy, as the cap
            continue


def main(argv: list[str]) -> None:
    if not argv or not argv[0].isdigit():
        sys.exit("usage: python -m autograder.grading.sandbox.outcap CHARS -f CONNECTION_FILE")
    install(int(argv[0]))
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]  # as ipykernel_launcher: the kernel puts the notebook's folder back
    from ipykernel import kernelapp

    sys.argv = [sys.argv[0], *argv[1:]]
    app = kernelapp.IPKernelApp.instance()  # ipykernel's launch_new_instance, in its steps
    app.initialize()
    app.shell.events.register("post_execute", flush_fd_output)
    app.start()


if __name__ == "__main__":
    main(sys.argv[1:])
