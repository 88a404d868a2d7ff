"""The grading sandbox's parts: the source policy, the bwrap command, refusing without bwrap.

The class-level behaviour (cheats graded end to end) is in ``test_sandbox_class.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.grading import sandbox
from autograder.grading.cells import nbg as _nbg
from autograder.grading.sandbox import Policy, bwrap_argv, bwrap_path, policy_problem
from autograder.grading.sandbox.policy import module_names

REPO = Path(__file__).resolve().parents[2]
PROTECTED = {"np", "torch", "math", "plt", "check_softmax", "requires"}

CHEATS = {
    "np.allclose = lambda *a, **k: True": "assigns to `np",
    "import numpy\nnumpy.testing.assert_allclose = print": "assigns to `numpy",
    "from numpy import testing as t\nt.assert_allclose = print": "assigns to `t",
    "T = torch.Tensor\nT.__eq__ = lambda s, o: True": "assigns to `T",
    "def f(x):\n    x.__class__.__eq__ = print": "internal attribute",
    "T = torch.Tensor\nT.allclose = lambda *a: True": "assigns to `T",
    "type(torch.zeros(1)).allclose = 1": "class (`type(...)`)",
    "import builtins\nbuiltins.len = lambda x: 0": "imports `builtins`",
    "__builtins__.len = lambda x: 0": "`__builtins__`",
    "import autograder.checks._core as c\nc._run = print": "imports `autograder",
    "from transformer_ref import attention": "imports `transformer_ref",
    "check_softmax = lambda f: None": "rebinds `check_softmax`",
    "def check_softmax(f):\n    pass": "redefines `check_softmax`",
    "get_ipython().input_transformers_cleanup.append(lambda l: [])": "`get_ipython`",
    "ip = get_ipython()\nip.showtraceback = print": "`get_ipython`",
    "m = __import__('numpy')": "`__import__`",
    "exec('x = 1')": "`exec`",
    "getattr(np, 'all' + 'close')": "`getattr` with a computed name",
    "getattr(x, '__globals__')": "`__globals__`",
    "import sys\nsys.modules['numpy'].allclose = 1": "assigns to `sys",
    "import sys\nmods = sys.modules": "`sys.modules`",
    "import sys as s\ns.settrace(print)": "`sys.settrace`",
    "from sys import modules": "`sys.modules`",
    "import gc\ngc.get_objects()": "imports `gc`",
    "import importlib": "imports `importlib`",
    "globals()['check_softmax'] = print": "`globals`",
    "def f():\n    return f.__code__": "`.__code__`",
    "import inspect": "imports `inspect`",
    "!rm -rf /": "shell command",
    "%load_ext autoreload": "magic",
}
LEGIT = [
    "import numpy as np\ndef softmax(x, axis=-1):\n    e = np.exp(x - x.max(axis, keepdims=True))\n"
    "    return e / e.sum(axis, keepdims=True)",
    "x = torch.zeros(3)\nx[0] = 1.0\nx.grad = None",
    "import sys\nprint('warning', file=sys.stderr)",
    "import os\nos._exit(1)",
    "%timeit sum(range(10))",
    "class M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.w = torch.nn.Parameter(torch.ones(2))",
    "value = getattr(data, split)",
    "with requires('Exercise 1'):\n    y = np.eye(3)",
]

OUTCAP = "autograder.grading.sandbox.outcap"  # the kernel's launcher module


@pytest.mark.parametrize("source", list(CHEATS))
def test_policy_names_each_cheat(source):
    problem = policy_problem(source, PROTECTED)
    assert problem is not None and CHEATS[source] in problem, problem


@pytest.mark.parametrize("source", LEGIT)
def test_policy_lets_ordinary_code_run(source):
    assert policy_problem(source, PROTECTED) is None


def _course_cells():
    for path in sorted((REPO / "solutions").glob("*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        trusted = [c.source for c in nb.cells if c.cell_type == "code"
                   and (_nbg(c).get("grade") or _nbg(c).get("locked"))
                   and not _nbg(c).get("solution")]
        yield path.stem, nb, set(trusted), module_names(trusted)


def test_policy_passes_every_cell_the_course_itself_writes():
    """No false alarm on the solutions or the free cells of any chapter."""
    flagged = []
    for name, nb, trusted, protected in _course_cells():
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.source not in trusted:
                problem = policy_problem(cell.source, protected)
                if problem:
                    flagged.append((name, _nbg(cell).get("grade_id"), problem))
    assert not flagged, flagged


def test_error_hook_restores_a_hidden_error():
    cell = nbformat.v4.new_code_cell("check(f)")
    reply = {"content": {"status": "error", "ename": "CheckFailed", "evalue": "wrong"}}
    Policy.on_cell_error(cell=cell, execute_reply=reply)
    assert [o.output_type for o in cell.outputs] == ["error"]
    Policy.on_cell_error(cell=cell, execute_reply=reply)  # one error output is enough
    assert len(cell.outputs) == 1


def test_bwrap_command_isolates_the_kernel(tmp_path):
    spec = {"bwrap": "/usr/bin/bwrap", "uid": 212345, "home": str(tmp_path),
            "ro": ["/usr", str(REPO / "autograder")], "env": {"HOME": "/tmp"}, "tmp_mb": 64}
    argv = bwrap_argv(spec, f"{tmp_path}/ipc/kernel.json")
    joined = " ".join(argv)
    for flag in ("--unshare-pid", "--unshare-net", "--die-with-parent", "--clearenv"):
        assert flag in argv
    assert str(REPO / "solutions") not in joined and "/root " not in joined
    assert f"--ro-bind {tmp_path}/work {tmp_path}/work" in joined
    assert argv[-2:] == ["-f", f"{tmp_path}/ipc/kernel.json"]


def _sandboxed(home: Path, code: str, tmp_mb: int = 64) -> str:
    """The stdout of ``python -c code`` started the way the kernel is (minus the kernel)."""
    (home / "work").mkdir()
    (home / "ipc").mkdir()
    spec = {"bwrap": bwrap_path(), "uid": 212345, "home": str(home),
            "ro": sandbox.readonly_paths(), "env": {"HOME": "/tmp"}, "tmp_mb": tmp_mb}
    argv = bwrap_argv(spec, "unused")
    cmd = argv[: argv.index(OUTCAP) - 2] + [sys.executable, "-c", code]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap not installed")
def test_sandbox_cannot_see_the_course_or_the_network(tmp_path):
    """A process started the way the kernel is (minus the kernel) sees only what it may."""
    probe = (
        "import os, socket\n"
        f"print(os.path.exists({str(REPO / 'solutions')!r}), os.path.exists('/root/.bashrc'),\n"
        f"      os.path.exists({str(REPO / 'autograder')!r}), os.getuid())\n"
        "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
        "    print('net')\nexcept OSError:\n    print('no net')\n"
    )
    uid = 212345 if os.geteuid() == 0 else os.geteuid()
    assert _sandboxed(tmp_path, probe).split() == ["False", "False", "True", str(uid), "no",
                                                   "net"]


SHM_PROBE = r"""
import json, multiprocessing, os
lock = multiprocessing.Lock()  # a POSIX semaphore: a file in /dev/shm
with lock:
    pass
def fill(path, mb):
    done = 0
    try:
        with open(path, "wb") as f:
            for _ in range(mb):
                f.write(b"x" * 2**20)
                f.flush()
                done += 1
    except OSError:
        pass
    return done
tmp = fill("/tmp/a", 10)
shm = fill("/dev/shm/b", 10)
print(json.dumps({"tmp": tmp, "shm": shm, "same": os.stat("/tmp").st_dev ==
                  os.stat("/dev/shm").st_dev, "dev": sorted(os.listdir("/dev"))}))
"""


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap not installed")
def test_dev_shm_and_tmp_share_one_budget(tmp_path):
    """Issue 47 item 7: ``/dev/shm`` is inside ``--tmp``: /tmp and /dev/shm fill up to the one
    size together, and POSIX semaphores (``multiprocessing``) work there. Before, /dev/shm was
    a memory file system of its own (bwrap's ``--dev``; the zygote's second tmpfs)."""
    seen = json.loads(_sandboxed(tmp_path, SHM_PROBE, tmp_mb=16).strip().splitlines()[-1])
    assert seen["same"], seen
    assert seen["tmp"] == 10 and seen["shm"] < 6, seen  # 16 MB in all, not 16 MB each
    assert {"null", "zero", "urandom", "shm", "fd"} <= set(seen["dev"]), seen["dev"]


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap not installed")
def test_kernels_share_the_class_s_font_list(tmp_path):
    """matplotlib's font list is built once per class and read, not rebuilt, by a kernel
    whose MPLCONFIGDIR (in its empty /tmp) stays writable."""
    from autograder.grading.sandbox.bwrap import font_cache, kernel_env

    (tmp_path / "work").mkdir()
    (tmp_path / "ipc").mkdir()
    fontlist = font_cache(tmp_path / "cache" / "mpl")
    assert fontlist and Path(fontlist).parent == tmp_path / "cache" / "mpl"
    assert font_cache(tmp_path / "cache" / "mpl") == fontlist  # built once
    spec = {"bwrap": bwrap_path(), "uid": 212345, "home": str(tmp_path),
            "ro": sandbox.readonly_paths(), "env": kernel_env({}), "tmp_mb": 64,
            "fontlist": fontlist}
    probe = (
        "import logging, os\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "import matplotlib.font_manager as fm\n"
        "d = os.environ['MPLCONFIGDIR']\n"
        "print(os.access(d, os.W_OK), sorted(os.listdir(d)), len(fm.fontManager.ttflist) > 0)\n"
    )
    argv = bwrap_argv(spec, "unused")
    cmd = argv[: argv.index(OUTCAP) - 2] + [sys.executable, "-c", probe]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == f"True ['{Path(fontlist).name}'] True", out.stdout
    assert "generated new fontManager" not in out.stderr, out.stderr
    spec.pop("fontlist")  # without it, each kernel scans the fonts again
    argv = bwrap_argv(spec, "unused")
    cmd = argv[: argv.index(OUTCAP) - 2] + [sys.executable, "-c", probe]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert "generated new fontManager" in out.stderr, out.stderr


def test_a_kernel_launcher_whose_grader_died_never_starts_the_sandbox(tmp_path):
    """The launcher runs between the grading process's fork and bwrap's own --die-with-parent:
    a grader killed in that window (the kill-at-a-random-moment test caught one) left a
    sandboxed kernel behind, re-parented to init. Started for a parent that is no longer its
    parent, the launcher kills itself before it reads anything."""
    import signal

    from autograder.grading.sandbox.kernel import PARENT_VAR

    cmd = [sys.executable, "-m", "autograder.grading.sandbox", "kernel",
           str(tmp_path / "no-spec.json"), str(tmp_path / "no-connection.json")]
    gone = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, PARENT_VAR: "1"})  # not its parent
    assert gone.returncode == -signal.SIGKILL, gone
    # its real parent: it goes on (and stops at the missing spec, which this test gives it)
    alive = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                           env={**os.environ, PARENT_VAR: str(os.getpid())})
    assert alive.returncode == 1 and "no-spec.json" in alive.stderr, alive


def test_grading_refuses_without_bwrap_unless_unsandboxed(tmp_path, monkeypatch, capsys):
    import autograder.grade as grade
    from autograder.grading.parent import runner

    monkeypatch.setattr(runner, "bwrap_path", lambda: None)
    (tmp_path / "subs").mkdir()
    assert grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "out"),
                       "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "refusing to grade" in err and "--unsandboxed" in err
    grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "out2"), "--no-progress",
                "--unsandboxed"])
    assert "refusing" not in capsys.readouterr().err


def test_copied_and_renamed_grade_ids_become_ordinary_cells(tmp_path):
    """nbgrader 0.9.6 fails on the whole notebook for these; the pre-pass defuses them."""
    from autograder.grading.sandbox import dedupe_grade_ids

    def cell(src, gid):
        c = nbformat.v4.new_code_cell(src)
        c.metadata["nbgrader"] = {"grade_id": gid, "grade": True, "points": 1}
        return c

    (tmp_path / "source" / "a").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[cell("assert f()", "t1")]),
                   tmp_path / "source" / "a" / "nb.ipynb")
    sub = tmp_path / "submitted" / "s" / "a" / "nb.ipynb"
    sub.parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[
        cell("pass", "t1"), cell("assert f()", "t1"), cell("pass", "t1_mine")]), sub)
    dedupe_grade_ids(tmp_path)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id")
           for c in nbformat.read(sub, as_version=4).cells]
    assert ids == ["t1", None, None]


def test_policy_allows_a_setup_name_reused_as_a_local_variable():
    """A student's local variable that shares a name with a locked cell's global is harmless
    and must not cost the exercise (found on notebook 07: a loop variable `example`)."""
    from autograder.grading.sandbox import policy_problem

    protected = {"example", "S", "check_softmax", "np"}
    ok = [
        "def f(xs):\n    for example in xs:\n        pass\n    return xs",
        "def f(x):\n    S = x @ x.T\n    return S",
        "def outer():\n    def check_softmax(f):\n        return f\n    return check_softmax",
        "f = lambda S: S + 1",
    ]
    for src in ok:
        assert policy_problem(src, protected) is None, src
    bad = {
        "S = 3": "rebinds `S`",
        "for example in range(3):\n    pass": "rebinds `example`",
        "def f(x):\n    global S\n    S = x": "rebinds `S`",
        "def check_softmax(f):\n    pass": "redefines `check_softmax`",
        "def f():\n    np.allclose = None": "assigns to `np...`",
    }
    for src, why in bad.items():
        assert why in (policy_problem(src, protected) or ""), src
