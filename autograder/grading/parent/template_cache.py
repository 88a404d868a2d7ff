"""course-grade's per-user cache of class templates: built once per release, copied per run.

A class template (``course.build_template``) is the same for every class graded with the same
sources, code and limits. It is built once in ``<cache>/template-<key>`` (``key``:
``course.template_key``) and each run into a new ``--out`` copies it into
``OUT/.work/template-<key>``, hard-linking the files nothing writes: deleting the cache never
changes a grade.

- The cache: ``$COURSE_CACHE``, else ``$XDG_CACHE_HOME/course-grade``, else
  ``~/.cache/course-grade``; ``COURSE_CACHE=off`` builds in the output folder.
- An entry is built in a ``.build-*`` folder and renamed into place; its ``.done`` lists every
  file and its size, and an entry that does not match it is built again, never copied.
- One ``flock`` per key: two runs build it once.
- The files holding the folder's own path and the gradebook are real copies, paths rewritten.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from ..env import CACHE

DONE = ".done"
RELOCATED = ("nbgrader_config.py", "spec.json")  # file names that hold the folder's path
COPIED = ("gradebook.db",)  # written in place by whoever opens it: never a link


def folder() -> Path | None:
    """The cache folder (made here), or None: ``COURSE_CACHE=off`` or it cannot be made."""
    value = os.environ.get(CACHE, "")
    if value == "off":
        return None
    if value:
        path = Path(value)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        path = Path(base) / "course-grade"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK | os.X_OK) else None


def complete(root: Path) -> bool:
    """Whether ``root`` is a finished template whose files all match its ``.done``."""
    try:
        manifest = json.loads((root / DONE).read_text())
        files = manifest["files"]
        return all((root / rel).stat().st_size == size for rel, size in files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _manifest(root: Path, built_at: Path) -> dict:
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink() and path.name != DONE:
            files[str(path.relative_to(root))] = path.stat().st_size
    return {"built_at": str(built_at), "files": files}


def _discard(path: Path) -> None:
    """Remove ``path`` (renamed aside first, so no one finds half of it)."""
    if path.exists() or path.is_symlink():
        aside = path.parent / f".stale-{uuid.uuid4().hex}"
        path.rename(aside)
        shutil.rmtree(aside, ignore_errors=True)


def _build(final: Path, build: Callable[[Path], None]) -> None:
    """``build(tmp)`` in a folder beside ``final``, then renamed to it with its ``.done``."""
    tmp = final.parent / f".build-{uuid.uuid4().hex}"
    try:
        build(tmp)
        (tmp / DONE).write_text(json.dumps(_manifest(tmp, tmp)))
        _discard(final)
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system, a link count at its limit
        shutil.copy2(src, dst)


def copy(entry: Path, dest: Path) -> None:
    """``dest``: a copy of the cache's ``entry`` (hard links but for :data:`COPIED` and the
    :data:`RELOCATED` files, whose ``built_at`` path becomes ``dest``), made beside it and
    renamed into place."""
    built_at = json.loads((entry / DONE).read_text())["built_at"]
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".copy-{uuid.uuid4().hex}"
    try:
        shutil.copytree(entry, tmp, symlinks=True, copy_function=_link,
                        ignore=shutil.ignore_patterns(DONE))
        for path in sorted(tmp.rglob("*")):
            if path.is_symlink() or not path.is_file():
                continue
            if path.name in COPIED:
                path.unlink()
                shutil.copy2(entry / path.relative_to(tmp), path)
            elif path.name in RELOCATED:
                text = path.read_text()
                path.unlink()  # a link to the cache's file: never written through
                path.write_text(text.replace(built_at, str(dest)))
        (tmp / DONE).write_text(json.dumps(_manifest(tmp, dest)))
        _discard(dest)
        tmp.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _locked(path: Path):
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def place(name: str, dest: Path, build: Callable[[Path], None]) -> None:
    """Make ``dest`` a finished template: ``build(folder)`` once into the cache's ``name``
    (again where that entry is partial or damaged) and copied to ``dest``; without a cache
    folder, built in ``dest``'s folder."""
    cache = folder()
    if cache is None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        _build_in_place(dest, build)
        return
    entry = cache / name
    with _locked(cache / f"{name}.lock"):
        if not complete(entry):
            _build(entry, build)
        copy(entry, dest)


def _build_in_place(dest: Path, build: Callable[[Path], None]) -> None:
    """``build(dest)`` where it stays (its files name their folder), ``.done`` last."""
    _discard(dest)
    try:
        build(dest)
        (dest / DONE).write_text(json.dumps(_manifest(dest, dest)))
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
