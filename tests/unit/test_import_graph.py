"""No import circle anywhere in ``autograder/``: the import graph, function-level imports
included, has no strongly connected component of more than one module."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def import_graph(package: Path = ROOT / "autograder") -> dict[str, set[str]]:
    """{module: the package's modules it imports, anywhere in its code}."""
    files = {}
    for path in package.rglob("*.py"):
        rel = path.relative_to(package.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        files[".".join(parts)] = path
    graph = {}
    for name, path in files.items():
        package_parts = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = package_parts[: len(package_parts) - node.level + 1] if node.level \
                    else []
                target = ".".join(base + ([node.module] if node.module else []))
                # ``from pkg import sub`` imports the submodule; a name from ``pkg`` itself
                # imports the package's ``__init__``
                found |= {f"{target}.{a.name}" if f"{target}.{a.name}" in files else target
                          for a in node.names}
        # a module's own packages are imported before it, never "back"
        graph[name] = {m for m in found if m in files and m != name
                       and not name.startswith(m + ".")}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other (Tarjan's strongly connected components).

    >>> circles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b']]
    """
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_in_autograder():
    graph = import_graph()
    assert "autograder.grading.autograde.verdict" in graph
    assert graph["autograder.grading.parent.student"]
    assert circles(graph) == []


def test_the_finder_sees_a_function_level_circle(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")
    assert circles(import_graph(pkg)) == [["pkg.a", "pkg.b"]]


def test_every_relative_import_names_a_module_that_exists():
    """Function-level imports run only when their function does: one left pointing at a
    module's old place (``from ..pyast`` after a move) would fail in a grading run, not here."""
    files = {".".join(p.relative_to(ROOT).with_suffix("").parts) for p in
             (ROOT / "autograder").rglob("*.py")}
    missing = []
    for path in (ROOT / "autograder").rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("").parts
        package = list(rel[:-1])
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level):
                continue
            base = ".".join(package[: len(package) - node.level + 1] +
                            ([node.module] if node.module else []))
            ok = f"{base}.__init__" in files or base in files
            names = [] if node.module else [a.name for a in node.names]
            # ``from . import x``: x a module of the package (or a name its __init__ defines)
            bad = [n for n in names if f"{base}.{n}" not in files
                   and f"{base}.{n}.__init__" not in files
                   and n not in (ROOT / Path(*base.split(".")) / "__init__.py").read_text()]
            if not ok or bad:
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}: {base} {bad or ''}")
    assert missing == []
