"""An earlier release's answers keep working in the current one (issue 47).

The graded notebook is rebuilt from the current release: its read-only cells (the setup's
imports, given helpers) replace the ones the student fetched. An answer written against an
earlier release may use any name those cells bound then (07's first release imported
``defaultdict``, which its count_pairs answer used: a NameError, 0 points, once the setup
stopped importing it). So the read-only cells only grow: every name that a read-only cell of
any release in the history bound (``tests/fixtures/earlier_releases/read_only_names.json``,
written by ``tests/helpers/earlier_releases.py``) is bound by the current release's. The
fixtures are what that script writes from the repository's history (skipped in a clone
without it).
"""

from __future__ import annotations

import json
import subprocess

import nbformat
import pytest

from autograder import release

from helpers import earlier_releases
from helpers.earlier_releases import NAMES, bound_names, read_only_names

RECORDED = json.loads(NAMES.read_text())


@pytest.mark.parametrize("chapter", sorted(RECORDED))
def test_read_only_cells_still_bind_every_name_an_earlier_release_bound(chapter):
    now = read_only_names(nbformat.read(release.RELEASE / chapter / f"{chapter}.ipynb",
                                        as_version=4))
    lost = sorted(set(RECORDED[chapter]) - now)
    assert not lost, (
        f"{chapter}: an earlier release's read-only cells bound {lost}, which answers written "
        "against it may use; keep them bound (e.g. the setup cell's imports)")


def test_a_setup_that_drops_an_import_is_caught():
    setup = "from collections import Counter, defaultdict\nimport re"
    assert {"Counter", "defaultdict", "re"} <= bound_names(setup)
    assert "defaultdict" not in bound_names(setup.replace(", defaultdict", ""))


def test_every_chapter_has_an_earlier_release_recorded():
    assert sorted(RECORDED) == release.chapters()


def test_fixtures_are_generated_from_history(tmp_path):
    commits = {*earlier_releases.SOLUTIONS_AT.values(), *earlier_releases.FIRST_RELEASE.values()}
    for commit in sorted(commits):
        known = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"],
                               cwd=earlier_releases.REPO, capture_output=True)
        if known.returncode != 0:
            pytest.skip(f"this clone lacks {commit}")
    earlier_releases.main(tmp_path)
    for name in [f"{c}.ipynb" for c in earlier_releases.CHAPTERS] + [NAMES.name]:
        assert (tmp_path / name).read_bytes() == (earlier_releases.HERE / name).read_bytes()
