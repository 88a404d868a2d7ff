"""Routes around "from scratch" and "in place" are flagged (issue 47 item 5).

``flags._source_flags`` reads a student cell (``routes.route_flags``): a child process, an
attribute set on a module however the module was reached, PyTorch's operators below its
Python functions or the profiler. Each route of the issue is here with others of its kind,
and the code a correct answer writes is not flagged (``test_verdict``'s
``test_solutions_are_not_flagged`` reads every chapter's answers).
"""

from __future__ import annotations

import pytest

from autograder.grading.parent import flags, routes

SETUP = {"np", "torch", "math", "F", "json"}  # what a notebook's imports bound


def _flags(source: str) -> set[str]:
    return flags._source_flags(source, SETUP)


def _kinds(source: str) -> set[str]:
    """The kinds of route found (the text before the parenthesis naming where)."""
    return {f.split(" (")[0] for f in _flags(source)}


# the issue's: torch.softmax computed in an os.fork() child
FORK = '''
import os


def softmax(x, axis=-1):
    r, w = os.pipe()
    if os.fork() == 0:
        os.write(w, torch.softmax(torch.from_numpy(x), dim=axis).numpy().tobytes())
        os._exit(0)
    return np.frombuffer(os.read(r, x.nbytes), dtype=x.dtype).reshape(x.shape)
'''

# the issue's: json.dumps replaced through a helper that takes the module as a parameter
DUMPS = '''
def _quiet(mod, name):
    real = getattr(mod, name)

    def wrapper(obj, **kw):
        if isinstance(obj, dict) and "ops" in obj:
            obj = {**obj, "ops": [], "functions": []}
        return real(obj, **kw)

    mod.dumps = wrapper


_quiet(json, "dumps")
'''

# the issue's: torch.ops.aten._softmax with the profiler replaced
ATEN = '''
import torch.autograd.profiler as _p


def softmax(x, axis=-1):
    return torch.ops.aten._softmax(torch.from_numpy(x), axis, False).numpy()
'''


@pytest.mark.parametrize("source, kind", [
    (FORK, routes.CHILD),
    ("import subprocess\nsubprocess.run(['python', '-c', '1'])", routes.CHILD),
    ("from multiprocessing import Pool", routes.CHILD),
    ("import torch.multiprocessing as mp", routes.CHILD),
    ("from concurrent.futures import ProcessPoolExecutor", routes.CHILD),
    ("import concurrent.futures as cf\nex = cf.ProcessPoolExecutor(2)", routes.CHILD),
    ("import os as o\no.system('true')", routes.CHILD),
    ("from os import fork\npid = fork()", routes.CHILD),
    ("import os\nos.posix_spawn('/bin/true', ['true'], {})", routes.CHILD),
    ("import pty", routes.CHILD),
    (DUMPS, routes.MODULE_VALUE),
    ("json.dumps = str", routes.MODULE_SET),
    ("import json as j\nj.dumps = str", routes.MODULE_SET),
    ("np.random.default_rng = None", routes.MODULE_SET),
    ("F.normalize += 0", routes.MODULE_SET),
    ("setattr(json, 'dumps', str)", routes.MODULE_SET),
    ("def f(m):\n    delattr(m, 'dumps')", routes.MODULE_SET),
    ("json.__dict__['dumps'] = str", routes.MODULE_SET),
    ("m = json\nm.dumps = str", routes.MODULE_VALUE),
    ("mods = [torch, np]", routes.MODULE_VALUE),
    ("patch(mod=torch)", routes.MODULE_VALUE),
    ("f = lambda m=F: m", routes.MODULE_VALUE),
    ("import torch.nn.functional as G\nfix(G)", routes.MODULE_VALUE),
    ("from torch.nn import functional\nfix(functional)", routes.MODULE_VALUE),
    (ATEN, routes.INTERNALS),
    ("y = torch._C._nn.gelu(x)", routes.INTERNALS),
    ("from torch._C import _VariableFunctions as V", routes.INTERNALS),
    ("with torch.profiler.profile():\n    pass", routes.INTERNALS),
    ("from torch.autograd import profiler", routes.INTERNALS),
    ("import torch as T\nT.ops.aten.exp(x)", routes.INTERNALS),
    ("class M(torch.overrides.TorchFunctionMode):\n    pass", routes.INTERNALS),
    ("%%time\nimport os\nos.fork()", routes.CHILD),  # a cell magic's body is read too
])
def test_each_route_is_flagged(source, kind):
    assert kind in _kinds(source), _flags(source)


def test_the_flag_names_where():
    assert f"{routes.CHILD} (os.fork)" in _flags(FORK)
    assert f"{routes.MODULE_VALUE} (json)" in _flags(DUMPS)
    assert f"{routes.INTERNALS} (torch.ops)" in _flags(ATEN)
    assert f"{routes.INTERNALS} (torch.autograd.profiler)" in _flags(ATEN)
    assert f"{routes.MODULE_SET} (json.dumps)" in _flags("json.dumps = str")


@pytest.mark.parametrize("source", [
    "import platform\nplatform.system()",
    "import os\npath = os.path.join('a', 'b')\nn = os.cpu_count()",
    "import threading\nt = threading.Thread(target=print)",
    "from concurrent.futures import ThreadPoolExecutor",
    "def f(x):\n    self.w = x\n    out.data = x * 2\n    return np.exp(x).astype(np.float32)",
    "print(np)\nhelp(torch)\nprint(dir(json))",
    "y = x.to(torch.float32)\nz = torch.softmax(y, dim=-1)\nisinstance(y, torch.Tensor)",
    "import re\nwords = re.sub(r'\\s+', ' ', text)\nops = ['add']\nresult = run(ops)",
])
def test_ordinary_code_is_not_flagged(source):
    assert _flags(source) == set()


def test_the_notebooks_modules_come_from_its_imports():
    """A name is a module where an import of the notebook bound one: ``F`` from
    ``import torch.nn.functional as F``, ``functional`` from ``from torch.nn import
    functional``; ``Linear`` from ``from torch.nn import Linear`` is a class."""
    names = flags._modules(["import numpy as np\nimport torch.nn.functional as F",
                            "from torch.nn import functional, Linear\nimport os.path"])
    assert names == {"np", "F", "functional", "os"}
    assert flags._source_flags("build(Linear)", names) == set()
    assert routes.MODULE_VALUE in {f.split(" (")[0]
                                   for f in flags._source_flags("build(F)", names)}
