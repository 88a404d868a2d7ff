"""A graded cell's rich outputs are capped in the kernel, as its streams are (issue 30).

Six 64 MB ``display_data`` messages made nbgrader's reader fall behind the kernel ("Timeout
waiting for IOPub output") and the whole notebook went ungraded. The kernel's launcher
(``autograder/grading/sandbox/outcap.py``) now sends a cell's rich outputs (displays and its result)
up to ``CHARS`` characters, then one note and nothing more; a record of the course's probe
(``application/vnd.course-record+json``) always gets through.

Here the kernel is started as grading starts it (``python -m autograder.grading.sandbox.outcap
CHARS -f CONNECTION_FILE``; outside the sandbox, which plays no part in it), with a cap of 12
MB and displays of 5 MB, smaller than the attack's, and what reaches the client is counted.
"""

from __future__ import annotations

import pytest

from helpers.outcap_kernel import cell_messages, outcap_kernel

CAP = 12_000_000
MB5 = 5_000_000
NOTE = f"[course-grade: output cut in the kernel after {CAP} characters]"
RECORD = "application/vnd.course-record+json"  # outcap.RECORD_MIME, spelled out as the probe


@pytest.fixture(scope="module")
def kc(tmp_path_factory):
    with outcap_kernel(tmp_path_factory.mktemp("kernel"), CAP) as client:
        yield client


def _run(kc, code: str) -> list[tuple[str, dict]]:
    """Execute ``code``; its rich outputs as (msg_type, data), once the kernel is idle."""
    outputs = []
    for msg in cell_messages(kc, code):
        kind = msg["msg_type"]
        if kind in ("display_data", "update_display_data", "execute_result"):
            outputs.append((kind, msg["content"]["data"]))
        if kind == "error":
            raise AssertionError("\n".join(msg["content"]["traceback"]))
    assert kc.get_shell_msg(timeout=60)["content"]["status"] == "ok"
    return outputs


def _chars(outputs) -> int:
    return sum(len(v) for _, data in outputs for v in data.values())


def test_six_5_mb_displays_send_the_cap_and_one_note_then_the_next_cell_is_whole(kc):
    flood = _run(kc, "from IPython.display import HTML, Image, display\n"
                     f"for i in range(3):\n"
                     f"    display(HTML('h' * {MB5}))\n"
                     f"    display(Image(data=b'p' * {MB5 * 3 // 4}, format='png'))\n")
    assert _chars(flood) <= CAP + len(NOTE), _chars(flood)
    assert flood[-1] == ("display_data", {"text/plain": NOTE})
    assert [data for _, data in flood].count({"text/plain": NOTE}) == 1
    assert len(flood) == 3  # two whole displays (10 MB), the note
    # the next cell has the whole budget again: a display and its result, 10 MB
    whole = _run(kc, f"class Big:\n"
                     f"    def _repr_html_(self):\n"
                     f"        return 'r' * {MB5}\n"
                     f"display(HTML('h' * {MB5}))\n"
                     f"Big()\n")
    assert [kind for kind, _ in whole] == ["display_data", "execute_result"]
    assert len(whole[0][1]["text/html"]) == len(whole[1][1]["text/html"]) == MB5


def test_a_record_of_any_size_is_sent_and_a_result_over_the_cap_is_the_note(kc):
    out = _run(kc, "from IPython.display import HTML, display, publish_display_data\n"
                   f"class Big:\n"
                   f"    def _repr_html_(self):\n"
                   f"        return 'r' * {MB5}\n"
                   f"publish_display_data({{{RECORD!r}: 'r' * {3 * CAP}}})\n"  # not counted
                   f"display(HTML('h' * {MB5}))\n"
                   f"display(HTML('h' * {2 * MB5}))\n"  # over: the note
                   f"publish_display_data({{{RECORD!r}: 'r' * {2 * CAP}}})\n"  # after the cut
                   f"Big()\n")  # nothing more of the cell's own
    assert [(kind, max(map(len, data.values()))) for kind, data in out] == [
        ("display_data", 3 * CAP), ("display_data", MB5), ("display_data", len(NOTE)),
        ("display_data", 2 * CAP)]
    assert RECORD in out[0][1] and RECORD in out[3][1] and out[2][1] == {"text/plain": NOTE}
    result = _run(kc, f"HTML('h' * {CAP + 1})")
    assert result == [("execute_result", {"text/plain": NOTE})]
