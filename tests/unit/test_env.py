"""Every ``COURSE_*`` environment variable is named in one module, ``autograder/grading/env.py``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from autograder.grading import env

ROOT = Path(__file__).resolve().parents[2]


def test_every_course_variable_is_named_only_in_env_py():
    named = []
    for path in sorted((ROOT / "autograder").rglob("*.py")):
        if path.name == "env.py" and path.parent.name == "grading":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and re.fullmatch(r"COURSE_[A-Z_]+", node.value):
                named.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}")
            if isinstance(node, ast.keyword) and re.fullmatch(r"COURSE_[A-Z_]+", node.arg or ""):
                named.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.arg}=")
    assert named == []


def test_env_lists_each_variable_once_with_its_own_name():
    names = {k: v for k, v in vars(env).items() if k.isupper() and k != "ALL"}
    assert sorted(names.values()) == sorted(env.ALL) and len(set(env.ALL)) == len(env.ALL)
    assert all(v == f"COURSE_{k}" for k, v in names.items())
