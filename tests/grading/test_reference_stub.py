"""The graded kernel cannot import the reference implementation of its chapter's exercises
(issue 14, item 3): the copy of ``transformer_ref`` it gets has no code for them, whatever the
route (import, ``importlib``, ``__import__``, ``sys.modules``, a thread), while the parts of
``transformer_ref`` the notebook uses for other things still work; chapter 07's ``tiktoken`` is
a stand-in that raises. The graded classes (tests/helpers/adversarial/) show the end-to-end rows.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.checks import _judge
from autograder.checks.table import TABLES
from autograder.grading.autograde import kernel_package, reference

REPO = Path(__file__).resolve().parents[2]
REAL = Path(importlib.util.find_spec("transformer_ref").origin).parent
IMPORTING = ("05_feed_forward_blocks", "06_transformer", "08_training")  # import transformer_ref


def _prepare(tmp_path: Path, chapter: str) -> dict:
    src = nbformat.read(REPO / f"solutions/{chapter}/{chapter}.ipynb", as_version=4)
    spec = kernel_package.prepare(tmp_path, [src])
    assert spec is not None
    return spec


def _defs(tree) -> dict[str, ast.AST]:
    """{qualified name: def} of a module's functions and methods."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    out[f"{node.name}.{item.name}"] = item
    return out


def _named(entries, module: str, qualname: str) -> bool:
    for e in entries:
        mod, _, name = e.partition(":")
        if mod == module and (not name or name == qualname or name == qualname.split(".")[0]):
            return True
    return False


@pytest.mark.parametrize("chapter", IMPORTING)
def test_kernel_copy_has_no_code_for_the_chapters_references(tmp_path, chapter):
    spec = _prepare(tmp_path, chapter)
    copy = Path(spec["ref_package"])
    entries = TABLES[chapter].reference
    assert entries and all(e.startswith("transformer_ref") for e in entries)
    stubbed = 0
    for real in sorted(REAL.rglob("*.py")):
        rel = real.relative_to(REAL)
        parts = rel.with_suffix("").parts
        module = ".".join(("transformer_ref", *(parts[:-1] if parts[-1] == "__init__" else parts)))
        mine = _defs(ast.parse((copy / rel).read_text()))
        theirs = _defs(ast.parse(real.read_text()))
        # every name is still there (+ the stubs' helper, where a reference was taken out)
        assert sorted(set(mine) - {"_unavailable"}) == sorted(theirs), rel
        for name, node in theirs.items():
            body = [s for s in mine[name].body
                    if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if _named(entries, module, name):  # its body: one call that raises
                assert len(body) == 1 and ast.unparse(body[0]).startswith("_unavailable("), name
                stubbed += 1
            else:  # the rest of the package as it is
                assert ast.dump(mine[name]) == ast.dump(node), f"{module}.{name}"
    assert stubbed >= len(entries)


KERNEL_05_06_08 = r"""
import importlib, sys, threading, torch

def outcome(f):
    box = []
    def run():
        try:
            box.append(type(f()).__name__)
        except Exception as e:
            box.append(type(e).__name__)
    t = threading.Thread(target=run)  # a thread of its own: the same answer
    t.start(); t.join()
    try:
        here = type(f()).__name__
    except Exception as e:
        here = type(e).__name__
    assert box[0] == here, (box, here)
    return here

import transformer_ref
cfg = transformer_ref.GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8)
x, ids = torch.randn(1, 3, 8), torch.zeros(1, 3, dtype=torch.long)
checks = {
    "mha": lambda: transformer_ref.MultiHeadAttention(8, 2)(x),
    "ffn": lambda: importlib.import_module("transformer_ref.ffn").FeedForward(8, 16),
    "encoder block": lambda: __import__("transformer_ref.blocks", fromlist=["x"])
        .EncoderBlock(8, 2)(x),
    "decoder block": lambda: sys.modules["transformer_ref"].DecoderBlock(8, 2)(x, x),
    "gpt": lambda: transformer_ref.GPT(cfg),
    "gpt forward": lambda: transformer_ref.GPT(cfg)(ids),
    "sinusoidal": lambda: transformer_ref.positional.sinusoidal_encoding(4, 8),
    "get_batch": lambda: importlib.import_module("transformer_ref.train.data").get_batch(
        torch.arange(50).numpy(), 2, 4),
    "get_lr": lambda: sys.modules.get("transformer_ref.train.trainer",
        importlib.import_module("transformer_ref.train.trainer")).get_lr(1, None),
    "sampler": lambda: __import__("transformer_ref.sampling", fromlist=["x"])
        .sample_next_token(torch.zeros(1, 3)),
    "load_checkpoint": lambda: importlib.import_module("transformer_ref.train")
        .load_checkpoint("x", None),
    "prepare_data": lambda: importlib.import_module("transformer_ref.train").prepare_data,
}
print({k: outcome(f) for k, f in checks.items()})
"""
R = "ReferenceUnavailable"
EXPECTED = {  # what the chapter's kernel gives; the real package: never ReferenceUnavailable
    "05_feed_forward_blocks": {"mha": "Tensor", "ffn": R, "encoder block": R,
                               "decoder block": R, "gpt": R, "gpt forward": R,
                               "sinusoidal": "Tensor"},
    "06_transformer": {"mha": "Tensor", "ffn": "FeedForward", "encoder block": "Tensor",
                       "decoder block": R, "gpt": "GPT", "gpt forward": R, "sinusoidal": R},
    "08_training": {"mha": "Tensor", "ffn": "FeedForward", "encoder block": "Tensor",
                    "decoder block": "Tensor", "gpt": "GPT", "gpt forward": "Tensor",
                    "sinusoidal": "Tensor", "get_batch": R, "get_lr": R, "sampler": R,
                    "load_checkpoint": R, "prepare_data": "function"},
}


def _kernel_run(path: Path, code: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=path, check=True).stdout
    return ast.literal_eval(out.strip().splitlines()[-1])


def test_chapter_kernels_lose_only_their_own_references(tmp_path):
    """One process per chapter kernel (05, 06, 08) runs every route; each reference of the
    chapter raises ReferenceUnavailable, the other parts of transformer_ref work."""
    for chapter, want in EXPECTED.items():
        spec = _prepare(tmp_path / chapter, chapter)
        got = _kernel_run(Path(spec["ref_package"]).parent, KERNEL_05_06_08)
        assert {k: got[k] for k in want} == want, chapter


def test_tiktoken_is_a_stand_in_in_chapter_07s_kernel(tmp_path):
    spec = _prepare(tmp_path, "07_bpe")
    assert set(spec["stubs"]) == {"tiktoken"}
    code = (
        "import importlib, tiktoken\n"
        "out = {}\n"
        "for name, f in {'Encoding': lambda: tiktoken.Encoding,\n"
        "                'educational': lambda: importlib.import_module('tiktoken._educational'),\n"
        "                'core': lambda: importlib.import_module('tiktoken.core')}.items():\n"
        "    try:\n"
        "        f(); out[name] = 'ok'\n"
        "    except Exception as e:\n"
        "        out[name] = type(e).__name__\n"
        "print(out)\n"
    )
    got = _kernel_run(Path(spec["stubs"]["tiktoken"]).parent, code)
    assert got == {"Encoding": R, "educational": "ModuleNotFoundError",
                   "core": "ModuleNotFoundError"}
    # the sandbox mounts the stand-in over the real package
    from autograder.grading.autograde.kernel_package import _add_probe_mounts
    from autograder.grading.sandbox.bwrap import package_dir

    mounts = {"ro": [], "env": {}}
    _add_probe_mounts(mounts, tmp_path, os.getuid())
    assert [spec["stubs"]["tiktoken"], package_dir("tiktoken")] in mounts["ro_as"]
    assert [spec["ref_package"], package_dir("transformer_ref")] in mounts["ro_as"]


def test_a_call_into_a_reference_is_judged_as_such():
    from autograder.checks.table import exercise

    assert reference.EXCEPTION == _judge.REFERENCE_UNAVAILABLE
    check = exercise("05_feed_forward_blocks", "1.3").declaration()  # ffn_param_count
    record = {"cases": [{"label": c.label, "status": "raised", "exc": R,
                         "msg": "transformer_ref.ffn.FeedForward.__init__ is ..."}
                        for c in check.cases]}
    v = _judge.judge(check, record)
    assert not v.passed and v.diagnosis == "used the reference implementation", v.message
    assert "reference implementation" in v.message
