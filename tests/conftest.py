"""The suite's three tiers, applied by folder so that no test can forget its marker.

========  =====================================================================  ===========
tier      what                                                                   folder
========  =====================================================================  ===========
unit      transformer_ref, BPE, the check library judged in-process, the         tests/unit/
          exercise table, release ``--check``, grading parts that need no        (and the
          sandbox; the packages' doctests                                        doctests)
grading   everything that runs ``course-grade``, a graded kernel or a sandbox    tests/grading/
slow      mutation, training and ``torch.compile``, DDP, the browser             tests/slow/
========  =====================================================================  ===========

``python3 -m autograder.bootstrap test --fast`` runs the unit tier (``-m unit``); ``test``
runs all three. Shared code lives in ``tests/helpers/`` (importable as ``helpers``: pytest's
``pythonpath``); no test module imports another.

A grading or slow module's tests run on one xdist worker (``--dist loadgroup``, the group
named after the module) so that its module fixtures (a graded class) are built once; modules
that share a class name one group (``pytestmark = pytest.mark.xdist_group("...")``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# As in the grading processes (autograder/grading/__init__.py): jsonschema's optional IRI
# format checker builds rfc3987_syntax's grammars on import, 4-6 s of CPU in every process
# that imports nbformat first; no notebook schema uses that format.
sys.modules.setdefault("rfc3987_syntax", None)

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "grading", "slow")


def tier_of(path: Path) -> str:
    """The tier of a collected file: its folder under tests/, else unit (doctests).

    >>> tier_of(TESTS / "grading" / "test_limits.py"), tier_of(TESTS.parent / "autograder")
    ('grading', 'unit')
    """
    try:
        top = Path(path).resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return "unit"
    return top if top in TIERS else "unit"


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        written = [m.name for m in item.iter_markers() if m.name in TIERS]
        if written:
            raise pytest.UsageError(
                f"{item.nodeid}: marked {written[0]!r} by hand; the tier is the folder "
                "(tests/unit, tests/grading, tests/slow)")
        tier = tier_of(item.path)
        item.add_marker(getattr(pytest.mark, tier))
        if tier != "unit" and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))


@pytest.fixture(scope="session", autouse=True)
def _class_templates(tmp_path_factory):
    """One class template per set of assignments and cell limit for the whole session
    (``helpers.synthetic_class.shared.template``): every test's course-grade run starts from
    it instead of building its own."""
    import helpers

    helpers.TEMPLATES = helpers.session_dir(tmp_path_factory) / "templates"
