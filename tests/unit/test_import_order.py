"""Imports run one way between the grader's sub-packages (issue 50, item 3): ``parent`` (the
``course-grade`` process) -> ``autograde`` (the grading process) -> ``sandbox`` (the kernel and
its confinement) -> the shared layer (``autograder/grading/*.py``: paths, the record type,
result types, the environment, the exercise table). The kernel-side check library
(``autograder/checks/``) imports only the shared layer. Every import counts, those inside
functions included (``test_import_graph.import_graph``)."""

from __future__ import annotations

from test_import_graph import import_graph

RANK = {"parent": 3, "autograde": 2, "sandbox": 1, "shared": 0, "checks": 0}


def layer(module: str) -> str | None:
    """The layer of an ``autograder`` module (None: outside the grader).

    >>> [layer(m) for m in ("autograder.grading.parent.runner", "autograder.grading.env",
    ...                     "autograder.checks._probe", "autograder.grade")]
    ['parent', 'shared', 'checks', None]
    """
    parts = module.split(".")
    if parts[:2] == ["autograder", "checks"]:
        return "checks"
    if parts[:2] != ["autograder", "grading"]:
        return None
    return parts[2] if len(parts) > 2 and parts[2] in RANK else "shared"


def against_the_order(graph: dict[str, set[str]]) -> list[str]:
    """``importer -> imported`` for each import that runs up the order.

    >>> against_the_order({"autograder.grading.sandbox.runners": {
    ...     "autograder.grading.parent.runner", "autograder.grading.env"}})
    ['autograder.grading.sandbox.runners -> autograder.grading.parent.runner']
    >>> against_the_order({"autograder.checks._probe": {"autograder.grading.autograde.records"}})
    ['autograder.checks._probe -> autograder.grading.autograde.records']
    """
    bad = []
    for module, imported in sorted(graph.items()):
        mine = layer(module)
        for other in sorted(imported):
            theirs = layer(other)
            if mine is None or theirs is None:
                continue
            if RANK[theirs] > RANK[mine] or (mine == "checks" and theirs not in ("checks",
                                                                                 "shared")):
                bad.append(f"{module} -> {other}")
    return bad


def test_imports_run_one_way_between_the_graders_layers():
    graph = import_graph()
    assert {layer(m) for m in graph} >= set(RANK)  # every layer is there to be checked
    assert against_the_order(graph) == []
