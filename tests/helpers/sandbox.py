"""A student's course folder as the runner leaves it, for the kernel-start tests."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from autograder.grading.autograde import kernel_package
from autograder.grading.sandbox import bwrap_path, readonly_paths

from . import REPO

SOURCE = REPO / "solutions"


def course_with_two_assignments(root: Path, uid: int) -> dict:
    """A student's course folder as the runner leaves it: sandbox-base.json, two assignments'
    probe folders and kernel packages (prepared as nbgrader_main does)."""
    home = root / "home"
    (home / "work").mkdir(parents=True)
    (root / ".grader").mkdir(parents=True)
    base = {"bwrap": bwrap_path() or "/usr/bin/bwrap", "uid": uid, "home": str(home),
            "ro": readonly_paths(), "env": {"HOME": "/tmp"}, "tmp_mb": 64, "config": {}}
    (root / ".grader" / "sandbox-base.json").write_text(json.dumps(base))
    specs = {}
    for a in ("01_attention", "02_masking"):
        src = nbformat.read(SOURCE / a / f"{a}.ipynb", as_version=4)
        specs[a] = kernel_package.prepare(root, [src], None, a)
    return specs
