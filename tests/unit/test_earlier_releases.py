"""tests/fixtures/earlier_releases/ is what tests/helpers/earlier_releases.py writes from the
repository's history (skipped in a clone without that commit)."""

from __future__ import annotations

import subprocess

import pytest

from helpers import earlier_releases


def test_fixtures_are_generated_from_history(tmp_path):
    known = subprocess.run(["git", "cat-file", "-e", f"{earlier_releases.COMMIT}^{{commit}}"],
                           cwd=earlier_releases.HERE, capture_output=True)
    if known.returncode != 0:
        pytest.skip(f"this clone lacks {earlier_releases.COMMIT}")
    earlier_releases.main(tmp_path)
    for chapter in earlier_releases.CHAPTERS:
        name = f"{chapter}.ipynb"
        assert (tmp_path / name).read_bytes() == (earlier_releases.HERE / name).read_bytes()
