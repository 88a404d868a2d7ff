"""Build the documentation site (``docs/``) and check every internal link of what was built.

    python3 -m autograder.bootstrap docs            # set up, then this: docs/_build/html
    .venv/bin/python -m autograder.docs --out DIR   # the same into DIR (the venv already set up)

Sphinx runs with warnings as errors (``-W --keep-going``), nitpicky (``-n``: a cross-reference
to nothing is a warning) and a fresh environment (``-E``: an incremental build would not repeat
an unchanged page's warnings). MyST reports a Markdown link to a missing page or heading as a
warning too. Then :func:`broken_links` reads every built page: each ``href``/``src`` that stays on
the site must name a file that was built (and, with ``#name``, an element of that page with that
id), and nothing the page loads by itself (a script, a stylesheet, an image) may come from the
network. The chapters are the student release, copied into ``docs/chapters/`` by
:func:`sync_chapters` (called from ``docs/conf.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
OUT = DOCS / "_build" / "html"

# (tag, attribute) pairs that a browser fetches on its own when the page loads
_FETCHED = {("script", "src"), ("link", "href"), ("img", "src"), ("iframe", "src"),
            ("source", "src"), ("video", "src"), ("audio", "src"), ("embed", "src"),
            ("object", "data")}
_LINKS = {("a", "href"), ("area", "href")} | _FETCHED


def _write_if_changed(path: Path, data: bytes) -> None:
    if path.is_file() and path.read_bytes() == data:
        return  # unchanged: Sphinx's environment sees the same file
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def sync_chapters(release: Path, dest: Path) -> list[Path]:
    """Copy each chapter of the student release (``release/NN_x/NN_x.ipynb`` and its
    ``figures/``) into ``dest/NN_x/``, rewriting only what changed and removing what the release
    no longer has. Returns the notebooks copied, in chapter order.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     src, out = Path(d, "nb"), Path(d, "out")
    ...     _ = (src / "01_a" / "figures").mkdir(parents=True)
    ...     _ = (src / "01_a" / "01_a.ipynb").write_text("{}")
    ...     _ = (src / "01_a" / "figures" / "f.svg").write_text("<svg/>")
    ...     _ = (out / "09_old").mkdir(parents=True)
    ...     [p.relative_to(out).as_posix() for p in sync_chapters(src, out)], sorted(
    ...         p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    (['01_a/01_a.ipynb'], ['01_a/01_a.ipynb', '01_a/figures/f.svg'])
    """
    wanted: dict[Path, Path] = {}
    notebooks = []
    for folder in sorted(p for p in release.iterdir() if p.is_dir()):
        nb = folder / f"{folder.name}.ipynb"
        if not nb.is_file():
            continue
        notebooks.append(dest / folder.name / nb.name)
        wanted[notebooks[-1]] = nb
        for fig in sorted((folder / "figures").glob("*")):
            if fig.is_file():
                wanted[dest / folder.name / "figures" / fig.name] = fig
    for target, source in wanted.items():
        _write_if_changed(target, source.read_bytes())
    if dest.is_dir():
        for path in sorted(dest.rglob("*"), reverse=True):  # files before their folders
            if path.is_file() and path not in wanted:
                path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
    return notebooks


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.refs: list[tuple[str, str, str]] = []  # (tag, attribute, value)

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value and (name == "id" or tag == "a"):
                self.ids.add(value)
            if value is not None and (tag, name) in _LINKS:
                if tag == "link" and not ({"stylesheet", "icon", "preload"} & set(
                        (dict(attrs).get("rel") or "").split())):
                    continue  # <link rel="index" ...> and the like: a link, not a fetch
                self.refs.append((tag, name, value))


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def broken_links(html_dir: Path) -> list[str]:
    """Every internal link of the built site that leads nowhere, and every resource a page
    would fetch from the network, one line each (``page: problem``). Empty when all is well.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = Path(d, "a.html").write_text('<h1 id="top">A</h1><a href="b.html#x">b</a>'
    ...         '<a href="#top">up</a><a href="#nope">?</a><a href="https://x.org/">ok</a>'
    ...         '<script src="https://cdn.x.org/m.js"></script><img src="gone.svg">')
    ...     _ = Path(d, "b.html").write_text('<p id="y">B</p>')
    ...     for line in broken_links(Path(d)): print(line)
    a.html: <a href="b.html#x">: no element with id "x" in b.html
    a.html: <a href="#nope">: no element with id "nope" in a.html
    a.html: <script src="https://cdn.x.org/m.js">: fetched from the network
    a.html: <img src="gone.svg">: gone.svg does not exist
    """
    html_dir = Path(html_dir).resolve()
    pages = sorted(p for p in html_dir.rglob("*.html")
                   if not any(part.startswith((".", "_")) for part in
                              p.relative_to(html_dir).parts[:-1]))
    parsed: dict[Path, _Page] = {}

    def page_of(path: Path) -> _Page:
        if path not in parsed:
            parsed[path] = _parse(path)
        return parsed[path]

    problems = []
    for page in pages:
        rel = page.relative_to(html_dir).as_posix()
        for tag, attr, value in page_of(page).refs:
            where = f'{rel}: <{tag} {attr}="{value}">'
            url = urlsplit(value.strip())
            if url.scheme in ("http", "https") or value.strip().startswith("//"):
                if (tag, attr) in _FETCHED:
                    problems.append(f"{where}: fetched from the network")
                continue  # a link out of the site: not followed offline
            if url.scheme:  # mailto:, data:, javascript:
                continue
            target = page if not url.path else (page.parent / unquote(url.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                problems.append(f"{where}: {unquote(url.path)} does not exist")
                continue
            if url.fragment and target.suffix == ".html":
                anchor = unquote(url.fragment)
                if anchor not in page_of(target).ids:
                    name = target.relative_to(html_dir).as_posix() if target.is_relative_to(
                        html_dir) else str(target)
                    problems.append(f'{where}: no element with id "{anchor}" in {name}')
    return problems


def build(out: Path = OUT, source: Path = DOCS) -> int:
    """Sphinx's HTML build of ``source`` into ``out`` (warnings are errors), then the link
    check. Returns 0 when both pass."""
    from sphinx.cmd.build import build_main

    rc = build_main(["-b", "html", "-W", "--keep-going", "-n", "-E", "-q",
                     "-d", str(Path(out) / ".doctrees"), str(source), str(out)])
    if rc:
        print(f"docs: sphinx-build failed (exit {rc}); its warnings are above", flush=True)
        return rc
    problems = broken_links(Path(out))
    for line in problems:
        print(f"docs: broken link: {line}", flush=True)
    if problems:
        return 1
    print(f"docs: built {Path(out) / 'index.html'} (no warnings, every internal link "
          "resolves, nothing fetched from the network)", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autograder.docs", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=OUT,
                   help="where the HTML goes (default: docs/_build/html)")
    p.add_argument("--source", type=Path, default=DOCS,
                   help="the Sphinx project (default: docs/, this course's site)")
    args = p.parse_args(argv)
    return build(args.out.resolve(), args.source.resolve())


if __name__ == "__main__":
    sys.exit(main())
