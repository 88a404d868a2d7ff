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

A grading or slow module's tests run on one xdist worker (:class:`GroupScheduling`, chosen
by ``--dist loadgroup``) so that its module fixtures (a graded class) are built once; the
modules that share a graded class are one group (:data:`SHARED_CLASSES`). xdist's own
``xdist_group`` mark does nothing with pytest 9 (it renames the test's ``_nodeid``, which
pytest no longer reads), so the groups are named here, where the scheduler can see them.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import pytest

# As in the grading processes (autograder/grading/__init__.py): jsonschema's optional IRI
# format checker builds rfc3987_syntax's grammars on import, 4-6 s of CPU in every process
# that imports nbformat first; no notebook schema uses that format.
sys.modules.setdefault("rfc3987_syntax", None)
# As `bootstrap test` sets them (autograder/bootstrap.py): one BLAS/OpenMP thread per process,
# for plain `pytest` too. Two xdist workers on two cores each running a kernel with two torch
# threads spin against each other: 08's solution notebook took 28.6-39.6 s of kernel CPU with
# two threads, 8.4-8.8 s with one. Set before anything imports torch; inherited by every
# process a test starts.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "grading", "slow")
# The modules whose tests read one graded class (built on the first worker that asks).
SHARED_CLASSES = {
    "chapters-02": ("grading/test_notebook02.py", "grading/test_notebook03.py",
                    "grading/test_notebook07.py"),
    "chapters-04": ("grading/test_notebook04.py", "grading/test_notebook05.py",
                    "grading/test_notebook06.py", "grading/test_notebook08.py"),
    "nb01-class": ("grading/test_grade_class.py", "slow/test_browser_report.py"),
    "attention-attacks": ("grading/test_verdict_class.py", "grading/test_dodge_class.py",
                          "grading/test_odd_files.py"),
}
_GROUP_OF = {f"tests/{m}": g for g, mods in SHARED_CLASSES.items() for m in mods}
# Unit modules whose module fixture costs seconds (a trained tokenizer, a gradebook, recorded
# checks): their tests run on one worker, so that it is built once, not once per worker.
UNIT_MODULE_GROUPS = ("unit/test_bpe_layouts.py", "unit/test_record_robustness.py",
                      "unit/test_submission_times.py")
_GROUP_OF |= {f"tests/{m}": f"tests/{m}" for m in UNIT_MODULE_GROUPS}


@functools.cache
def tier_of(path: Path) -> str:
    """The tier of a collected file: its folder under tests/, else unit (doctests); once per
    file (a resolve per collected test was ~0.4 s of each worker's collection).

    >>> tier_of(TESTS / "grading" / "test_limits.py"), tier_of(TESTS.parent / "autograder")
    ('grading', 'unit')
    """
    try:
        top = Path(path).resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return "unit"
    return top if top in TIERS else "unit"


def pytest_collection_modifyitems(config, items):
    for item in items:
        written = [m.name for m in item.iter_markers() if m.name in TIERS]
        if written:
            raise pytest.UsageError(
                f"{item.nodeid}: marked {written[0]!r} by hand; the tier is the folder "
                "(tests/unit, tests/grading, tests/slow)")
        item.add_marker(getattr(pytest.mark, tier_of(item.path)))


def group_of(nodeid: str) -> str:
    """The xdist work unit of a test: its shared class's group, its module for the other
    grading and slow tests and for :data:`UNIT_MODULE_GROUPS`, the test itself in the rest of
    the unit tier.

    >>> group_of("tests/grading/test_notebook05.py::test_grading_path_proofs")
    'chapters-04'
    >>> group_of("tests/grading/test_limits.py::test_x"), group_of("tests/unit/test_a.py::t")
    ('tests/grading/test_limits.py', 'tests/unit/test_a.py::t')
    >>> group_of("tests/unit/test_bpe_layouts.py::test_tiktoken_rank_file")
    'tests/unit/test_bpe_layouts.py'
    """
    module = nodeid.split("::", 1)[0]
    if module in _GROUP_OF:
        return _GROUP_OF[module]
    if module.startswith(("tests/grading/", "tests/slow/")):
        return module
    return nodeid


def pytest_xdist_make_scheduler(config, log):
    """With ``--dist loadgroup``: xdist's scope scheduling, the scopes being :func:`group_of`."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)


@pytest.fixture(scope="session", autouse=True)
def _class_templates(tmp_path_factory):
    """One class template per set of assignments and cell limit for the whole session
    (``helpers.synthetic_class.shared.template``): every test's course-grade run starts from
    it instead of building its own."""
    import os

    from autograder.grading.env import CACHE

    import helpers

    helpers.TEMPLATES = helpers.session_dir(tmp_path_factory) / "templates"
    # and one per-user template cache for the session (parent/template_cache.py): every
    # course-grade run into a fresh --out copies its template from there; ~/.cache untouched
    before = os.environ.get(CACHE)
    os.environ[CACHE] = str(helpers.session_dir(tmp_path_factory) / "cache")
    yield
    if before is None:
        os.environ.pop(CACHE, None)
    else:
        os.environ[CACHE] = before
