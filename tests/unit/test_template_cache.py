"""The per-user cache of class templates (parent/template_cache.py) and its key
(course.template_key): built once, copied into each output folder, never used partial."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from autograder.grading.autograde import kernel_package
from autograder.grading.config import GradeConfig
from autograder.grading.env import CACHE
from autograder.grading.parent import course, template_cache


@pytest.fixture
def source(tmp_path):
    chapter = tmp_path / "source" / "01_x"
    chapter.mkdir(parents=True)
    (chapter / "01_x.ipynb").write_text('{"cells": []}')
    (chapter / "data.txt").write_text("1 2 3")
    return tmp_path / "source"


def key(source, timeout=60):
    return course.template_key(source, ["01_x"], GradeConfig(cell_timeout=timeout))


def test_the_key_covers_what_the_template_is_made_from(source, tmp_path, monkeypatch):
    first = key(source)
    assert key(source) == first
    chapter = source / "01_x"
    # what is never copied into the template does not count
    (chapter / "01_x.py").write_text("# the jupytext source")
    (chapter / "figures").mkdir()
    (chapter / "figures" / "a.svg").write_text("<svg/>")
    (chapter / ".hidden").write_text("x")
    assert key(source) == first
    changes = [
        lambda: (chapter / "01_x.ipynb").write_text('{"cells": [1]}'),
        lambda: (chapter / "data.txt").write_text("1 2 4"),
        lambda: (chapter / "more.csv").write_text("a,b"),
    ]
    seen = {first}
    for change in changes:
        change()
        seen.add(key(source))
    assert len(seen) == 1 + len(changes)
    seen.add(key(source, timeout=61))  # the nbgrader configuration written
    config = tmp_path / "nbgrader_config.py"
    config.write_text("c = get_config()\n")
    monkeypatch.setattr(course, "REPO_CONFIG", config)
    seen.add(key(source))
    config.write_text("c = get_config()\nc.X = 1\n")
    seen.add(key(source))
    monkeypatch.setattr(kernel_package, "code_digest", lambda: "other code")  # checks, grader
    seen.add(key(source))
    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: "0.0" if name == "nbgrader" else real(name))
    seen.add(key(source))
    assert len(seen) == 1 + len(changes) + 5


class Builds:
    """A stand-in template build: counts its calls, writes files like the real one's."""

    def __init__(self, pause=0.0):
        self.calls, self.pause = [], pause

    def __call__(self, root: Path) -> None:
        self.calls.append(root)
        time.sleep(self.pause)
        (root / "kernels" / "k").mkdir(parents=True)
        (root / "kernels" / "k" / "spec.json").write_text(json.dumps({"package": str(root)}))
        (root / "nbgrader_config.py").write_text(f"c.CourseDirectory.root = {str(root)!r}\n")
        (root / "gradebook.db").write_bytes(b"sqlite")
        (root / "release.ipynb").write_text("{}")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_built_once_and_each_output_folder_holds_its_own_copy(cache, tmp_path):
    build = Builds()
    one, two = tmp_path / "out1" / "t", tmp_path / "out2" / "t"
    template_cache.place("template-a", one, build)
    template_cache.place("template-a", two, build)
    assert len(build.calls) == 1 and build.calls[0].parent == cache
    entry = cache / "template-a"
    for dest in (one, two):
        assert template_cache.complete(dest)
        assert os.path.samefile(dest / "release.ipynb", entry / "release.ipynb")  # a link
        assert not os.path.samefile(dest / "gradebook.db", entry / "gradebook.db")
        assert json.loads((dest / "kernels" / "k" / "spec.json").read_text()) == {
            "package": str(dest)}
        assert str(dest) in (dest / "nbgrader_config.py").read_text()
    # the cache's own files keep the path they were built at (never written through a link)
    built_at = json.loads((entry / ".done").read_text())["built_at"]
    assert json.loads((entry / "kernels" / "k" / "spec.json").read_text()) == {
        "package": built_at}
    shutil.rmtree(cache)  # the output folder does not need the cache afterwards
    assert (one / "release.ipynb").read_text() == "{}" and template_cache.complete(one)


@pytest.mark.parametrize("damage", ["truncated", "deleted", "no manifest", "bad manifest"])
def test_a_damaged_entry_is_built_again(cache, tmp_path, damage):
    build = Builds()
    template_cache.place("template-a", tmp_path / "out1" / "t", build)
    entry = cache / "template-a"
    if damage == "truncated":
        (entry / "release.ipynb").write_text("")
    elif damage == "deleted":
        (entry / "gradebook.db").unlink()
    elif damage == "no manifest":
        (entry / ".done").unlink()
    else:
        (entry / ".done").write_text("{")
    assert not template_cache.complete(entry)
    dest = tmp_path / "out2" / "t"
    template_cache.place("template-a", dest, build)
    assert len(build.calls) == 2
    assert template_cache.complete(entry) and template_cache.complete(dest)
    assert (dest / "release.ipynb").read_text() == "{}"


def test_a_failed_build_leaves_nothing_to_use(cache, tmp_path):
    def failing(root):
        Builds()(root)
        raise SystemExit("nbgrader generate_assignment failed")

    with pytest.raises(SystemExit):
        template_cache.place("template-a", tmp_path / "out" / "t", failing)
    assert sorted(p.name for p in cache.iterdir()) == ["template-a.lock"]
    assert not (tmp_path / "out" / "t").exists()


def test_two_runs_at_once_build_it_once(cache, tmp_path):
    build = Builds(pause=0.5)
    dests = [tmp_path / f"out{i}" / "t" for i in range(2)]
    threads = [threading.Thread(target=template_cache.place, args=("template-a", d, build))
               for d in dests]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(build.calls) == 1
    assert all(template_cache.complete(d) for d in dests)


def test_without_a_cache_it_is_built_in_the_output_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE, "off")
    build = Builds()
    dest = tmp_path / "out" / "t"
    template_cache.place("template-a", dest, build)
    assert build.calls == [dest] and template_cache.complete(dest)
    assert str(dest) in (dest / "nbgrader_config.py").read_text()


def test_the_default_folder_is_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert template_cache.folder() == tmp_path / "xdg" / "course-grade"
