"""The graded kernel's cap on a cell's rich outputs (``autograder/grading/sandbox/outcap.py``,
``install_rich``), on ipykernel's own display publisher and displayhook with a session that
records what would be sent: no kernel here (tests/grading/test_kernel_rich_output_cap.py runs
one). Six 64 MB displays made nbgrader's reader fall behind and the notebook go ungraded
(issue 30); a record of the course's probe must always get through."""

from __future__ import annotations

import time

import pytest
from ipykernel.displayhook import ZMQShellDisplayHook
from ipykernel.zmqshell import ZMQDisplayPublisher
from IPython.core.interactiveshell import InteractiveShellABC
from jupyter_client.session import Session

from autograder.grading.sandbox import outcap
from autograder.grading.sandbox.outcap import RECORD_MIME

CAP = 10_000
NOTE = {"text/plain": f"[course-grade: output cut in the kernel after {CAP} characters]"}


class Recorder(Session):
    """A session that keeps what it would send: (msg_type, content)."""

    def send(self, stream, msg_or_type, content=None, parent=None, ident=None, **kw):
        msg = msg_or_type if isinstance(msg_or_type, dict) else self.msg(msg_or_type, content)
        self.sent.append((msg["header"]["msg_type"], msg["content"]))
        return msg


class Shell(InteractiveShellABC):
    """What the displayhook's constructor needs of a shell."""

    user_ns: dict = {}


@pytest.fixture
def kernel(monkeypatch):
    """(publisher, displayhook, session, new_cell) with the cap installed; ipykernel's classes
    are put back after the test."""
    monkeypatch.setattr(ZMQDisplayPublisher, "publish", ZMQDisplayPublisher.publish)
    monkeypatch.setattr(ZMQShellDisplayHook, "write_format_data",
                        ZMQShellDisplayHook.write_format_data)
    outcap.install_rich(CAP)
    session = Recorder()
    session.sent = []
    pub = ZMQDisplayPublisher(session=session)
    hook = ZMQShellDisplayHook(shell=Shell(), session=session)

    def new_cell():
        parent = session.msg("execute_request", {"code": ""})
        pub.set_parent(parent)
        hook.set_parent(parent)
        session.sent.clear()

    new_cell()
    return pub, hook, session, new_cell


def _result(hook, data):
    """What the displayhook does with a cell's last expression (IPython's ``__call__``)."""
    hook.start_displayhook()
    hook.write_format_data(data, {})
    hook.finish_displayhook()


def _sizes(session):
    return [(kind, sum(len(v) for v in content["data"].values()))
            for kind, content in session.sent]


def test_a_display_flood_is_cut_with_one_note(kernel):
    pub, _, session, _ = kernel
    for _ in range(6):
        pub.publish({"text/html": "x" * 4000})
    assert _sizes(session)[:2] == [("display_data", 4000)] * 2  # what fits is sent whole
    assert len(session.sent) == 3 and session.sent[2][1]["data"] == NOTE


def test_a_new_cell_has_the_whole_budget_again(kernel):
    pub, hook, session, new_cell = kernel
    pub.publish({"text/html": "x" * (CAP + 1)})
    pub.publish({"text/html": "small"})
    assert [c["data"] for _, c in session.sent] == [NOTE]  # one larger than the cap: cut too
    new_cell()
    pub.publish({"image/png": "p" * 4000}, {"image/png": {"width": 10}})
    _result(hook, {"text/plain": "r" * 4000})
    assert _sizes(session) == [("display_data", 4000), ("execute_result", 4000)]


def test_the_result_shares_the_budget_and_is_cut_to_the_note(kernel):
    pub, hook, session, new_cell = kernel
    pub.publish({"text/html": "x" * 6000})
    _result(hook, {"text/plain": "repr", "text/html": "h" * 6000})
    _result(hook, {"text/plain": "a later result of the same cell"})  # cut: nothing sent
    assert [kind for kind, _ in session.sent] == ["display_data", "execute_result"]
    assert session.sent[1][1]["data"] == NOTE
    new_cell()
    _result(hook, {"text/plain": "r" * 9000})
    assert _sizes(session) == [("execute_result", 9000)]


def test_a_record_is_never_cut_or_counted(kernel):
    pub, hook, session, new_cell = kernel
    record = {RECORD_MIME: "{" + "r" * (5 * CAP) + "}"}
    pub.publish(record)  # larger than the cap, first: sent, not counted
    pub.publish({"text/html": "x" * 9000})  # so this one still fits
    assert [c["data"] for _, c in session.sent] == [record, {"text/html": "x" * 9000}]
    new_cell()
    pub.publish({"text/html": "x" * (CAP + 1)})
    pub.publish({"text/html": "more"})
    pub.publish(record)  # after the cut: still sent
    _result(hook, {**record, "text/plain": "a record as the cell's result"})
    assert [c["data"] for _, c in session.sent] == [
        NOTE, record, {**record, "text/plain": "a record as the cell's result"}]


def test_many_empty_displays_are_a_flood_too(kernel):
    pub, _, session, _ = kernel
    start = time.perf_counter()
    for _ in range(1000):
        pub.publish({"text/plain": ""})
    assert len(session.sent) <= CAP // outcap.MESSAGE_CHARS + 1
    assert session.sent[-1][1]["data"] == NOTE
    assert time.perf_counter() - start < 5


def test_updates_count_and_the_note_is_a_display_of_its_own(kernel):
    pub, _, session, _ = kernel
    handle = {"display_id": "progress"}
    for i in range(100):
        pub.publish({"text/html": f"{i}%" + "." * 1000}, transient=handle, update=i > 0)
    kinds = [kind for kind, _ in session.sent]
    assert kinds[0] == "display_data" and set(kinds[1:-1]) == {"update_display_data"}
    assert len(kinds) < 10 and kinds[-1] == "display_data"
    assert session.sent[-1][1]["data"] == NOTE and session.sent[-1][1]["transient"] == {}


def test_counting_stops_past_what_is_left():
    huge = {"application/json": {str(i): i for i in range(10**6)}}
    start = time.perf_counter()
    assert outcap._size(huge, 1000) > 1000
    cycle: list = []
    cycle.append(cycle)
    assert outcap._size(cycle, 1000) > 1000
    assert time.perf_counter() - start < 0.5
    assert outcap._size({"a": ["bc", b"de", 1, None]}, 100) == 2 + 3 + 2 + 4 + 4 + 8 + 8
