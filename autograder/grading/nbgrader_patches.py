"""Every change the course makes to nbgrader's and nbconvert's own code, in one place.

Each one saves time or makes their code safe where the course runs it in threads, and
changes no result:

- :func:`use_cached_head`: nbgrader 0.9.6 runs the ``alembic`` command in a subprocess (about a
  second) every time it opens a gradebook, only to read the schema's head revision, fixed for an
  installed nbgrader (``autograde`` opens it about eight times). The parent looks the head up
  once (:func:`ensure_cached_head`) and passes it in ``COURSE_ALEMBIC_HEAD``; this answers
  nbgrader's question from there.
- :func:`share_compiled_templates`: nbconvert's Jinja templates compiled once per process.
- :func:`share_engines`: one SQLAlchemy engine per gradebook, so its SQL is compiled once.

Each is idempotent, and each is applied by the process that needs it (``course-grade`` for the
head, ``autograde/nbgrader_main`` for all three).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from .env import ALEMBIC_HEAD

HEAD_VAR = ALEMBIC_HEAD


def _migrations() -> Path:
    """nbgrader's alembic folder, found without importing nbgrader (its package imports its
    server extensions: about 2 s)."""
    import importlib.util

    spec = importlib.util.find_spec("nbgrader")
    return Path(next(iter(spec.submodule_search_locations))) / "alembic"


def schema_head() -> str:
    """The gradebook schema's head revision, as ``alembic heads`` prints it, without a
    subprocess: read from the migration scripts' ``revision`` and ``down_revision`` (the one
    revision no other script names as its parent), not by running them (alembic imports each:
    1 s). Where that does not find exactly one head, alembic answers."""
    import ast

    from .pyast import parse

    def strings(node) -> list[str]:  # 'abc', None or ('abc', 'def'): the names it holds
        items = node.elts if isinstance(node, ast.Tuple | ast.List) else [node]
        return [n.value for n in items if isinstance(n, ast.Constant) and type(n.value) is str]

    revisions, parents = set(), set()
    for path in sorted((_migrations() / "versions").glob("*.py")):
        for node in parse(path.read_text()).body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)):
                continue
            if node.targets[0].id == "revision":
                revisions.update(strings(node.value))
            elif node.targets[0].id == "down_revision":
                parents.update(strings(node.value))
    heads = revisions - parents
    if len(heads) == 1:
        return heads.pop()
    return alembic_head()


def alembic_head() -> str:
    """The head as alembic computes it (it runs every migration script)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(_migrations())).get_current_head()


def ensure_cached_head() -> None:
    """Look the head up once (in the grader) and cache it here and for the commands it starts
    (:func:`use_cached_head` answers nbgrader's own question)."""
    if not os.environ.get(HEAD_VAR):
        os.environ[HEAD_VAR] = schema_head()
    if "nbgrader.api" in sys.modules:
        use_cached_head()


def warm():
    """Import nbgrader's gradebook code (about 2 s) in a daemon thread, while the students'
    grading runs; returns the thread. An import that fails here raises where it is needed."""
    from .background import head_start

    return head_start(use_cached_head, "course-grade-nbgrader")


def use_cached_head() -> None:
    """Answer nbgrader's schema-head question from the environment when it is there."""
    import nbgrader.api

    head = os.environ.get(HEAD_VAR)
    if head:
        nbgrader.api.get_alembic_version = lambda: head


def share_compiled_templates() -> None:
    """Compile nbconvert's Jinja templates once per process instead of once per page (0.4 s
    of each): every Jinja environment shares one in-memory bytecode cache, checked against
    the template's checksum. Idempotent.
    """
    import jinja2
    from nbconvert.exporters.templateexporter import TemplateExporter

    if getattr(TemplateExporter._create_environment, "shared_cache", None) is not None:
        return

    class Memory(jinja2.BytecodeCache):
        def __init__(self):
            self.store: dict[str, bytes] = {}

        def load_bytecode(self, bucket):
            data = self.store.get(bucket.key)
            if data is not None:
                bucket.bytecode_from_string(data)  # reset there if the checksum differs

        def dump_bytecode(self, bucket):
            self.store[bucket.key] = bucket.bytecode_to_string()

    cache = Memory()
    create = TemplateExporter._create_environment

    def _create_environment(self):
        environment = create(self)
        environment.bytecode_cache = cache
        return environment

    _create_environment.shared_cache = cache
    TemplateExporter._create_environment = _create_environment


def share_engines() -> None:
    """One SQLAlchemy engine per gradebook URL in this process, instead of one per
    ``Gradebook`` (about six a notebook), so each statement is compiled once per process.
    Each ``Gradebook`` keeps its own session; engines are thread-safe. Idempotent.
    """
    import nbgrader.api

    if getattr(nbgrader.api.create_engine, "shared", False):
        return
    create = nbgrader.api.create_engine
    lock = threading.Lock()
    engines: dict = {}

    def create_engine(url, **kwargs):
        key = (str(url), tuple(sorted(kwargs.items())))
        with lock:
            if key not in engines:
                engines[key] = create(url, **kwargs)
            return engines[key]

    create_engine.shared = True
    nbgrader.api.create_engine = create_engine
