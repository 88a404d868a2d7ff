"""The grader parses Python one thread at a time (CPython < 3.11.8, gh-106905).

Two students graded at once by the pool both parse (verdict stubs, flags, the source
policy); without the lock one of them was "not graded: grader error (SystemError: AST
constructor recursion depth mismatch ...)" in a CI run.
"""

from __future__ import annotations

import ast
import re
import threading
import time
from pathlib import Path

from autograder.grading import pyast

GRADING = Path(__file__).resolve().parents[2] / "autograder" / "grading"


def test_parses_never_overlap(monkeypatch):
    inside, most = [0], [0]
    real = pyast._ORIGINAL

    def slow_parse(*args, **kwargs):
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.02)  # gives the GIL away, as a __del__ in the converter would
        inside[0] -= 1
        return real(*args, **kwargs)

    monkeypatch.setattr(pyast, "_ORIGINAL", slow_parse)
    threads = [threading.Thread(target=pyast.parse, args=("x = 1",)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1


def test_the_grading_package_parses_only_through_the_lock():
    direct = []
    for path in GRADING.rglob("*.py"):
        if path.name == "pyast.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if re.search(r"\bast\.parse\(|literal_eval\(", code) and ">>>" not in line:
                direct.append(f"{path.relative_to(GRADING)}:{n}: {line.strip()}")
    assert not direct, "parse through autograder.grading.pyast.parse:\n" + "\n".join(direct)


def test_install_routes_every_ast_parse_of_the_process_through_the_lock(monkeypatch):
    monkeypatch.setattr(ast, "parse", ast.parse)  # undone after the test
    pyast.install()
    assert ast.parse is pyast.parse
    # the standard library's own callers resolve it at call time: literal_eval, traceback
    calls, original = [], pyast._ORIGINAL
    monkeypatch.setattr(pyast, "_ORIGINAL", lambda *a, **k: calls.append(a) or original(*a, **k))
    assert ast.literal_eval("[1, 2]") == [1, 2]
    assert calls

