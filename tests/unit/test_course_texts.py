"""What the student trial (issue 18) and issue 32 found in the course's texts, kept fixed.

The five source texts are named by what they are, not by an internal "seed 000" number a
student cannot look up. Chapter 1 ends with a Sources section that defines a tag for each,
[S1] to [S5]: what the text is, its notation and the passages the course quotes. The chapters
cite the texts by those tags instead of describing them at length ("the Transformer-block blog
post (§7) observes ..."). Chapter 7's given helpers sit in their own locked cell, so rewriting
the answer cell cannot lose them.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
SEED_NUMBER = re.compile(r"\bseeds?\s+00[0-4]\b", re.IGNORECASE)
# a citation: [S3], [S5, §7]; also catches a malformed or undefined one such as [S 6] or [s2]
CITATION = re.compile(r"\[\s*[Ss]\s*(\d+)\s*(?:,[^\]\n]*)?\]")
# the long anonymous descriptions the tags replaced (issue 32 item 7), across line breaks
_SP = r"(?:\s|\n#)+"
LONG_FORM = re.compile(
    rf"column-vector{_SP}lecture{_SP}notes|row-form{_SP}tutorial|personal{_SP}wiki{_SP}page"
    rf"|encoder-decoder{_SP}survey|Transformer-block{_SP}blog{_SP}post",
    re.IGNORECASE)
# a text mentioned by its short name with no tag ("the survey writes ..."); "[S4] the survey"
# (a definition or list) and "the survey [S4]" / "the survey's [S4]" are fine
BARE = re.compile(r"(?<!\] )\b[Tt]he\s+(?:lecture\s+notes|tutorial|wiki\s+page|survey|blog\s+post)"
                  r"\b(?!'?s?\s*\[\s*S\d)")
SOURCES_HEADING = re.compile(r"^### \[S(\d+)\] (.+)$", re.MULTILINE)


def _chapters():
    """(path, text) of every chapter notebook, solution and release: markdown, code, outputs."""
    for folder in ("solutions", "notebooks"):
        for path in sorted((ROOT / folder).glob("*/*.ipynb")):
            nb = nbformat.read(path, as_version=4)
            parts = []
            for c in nb.cells:
                parts.append(c.source)
                for out in c.get("outputs", []):
                    plain = out.get("data", {}).get("text/plain", "")
                    parts.append(out.get("text", "") or str(plain))
            yield path, "\n".join(parts)


def _learner_texts():
    """The chapters and the check library's messages (what a learner reads)."""
    yield from _chapters()
    for path in sorted((ROOT / "autograder" / "checks").glob("*.py")):
        yield path, path.read_text()


def _sources_cell(folder="notebooks"):
    nb = nbformat.read(ROOT / folder / "01_attention/01_attention.ipynb", as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "markdown"
             and c.source.startswith("## Sources")]
    assert len(cells) == 1, f"{folder}: chapter 1 needs exactly one '## Sources' cell"
    return nb, cells[0]


def _defined_tags(text: str) -> dict[int, str]:
    return {int(n): title for n, title in SOURCES_HEADING.findall(text)}


def _texts():
    for folder in ("solutions", "notebooks"):
        for path in sorted((ROOT / folder).glob("*/*.ipynb")):
            nb = nbformat.read(path, as_version=4)
            yield path, "\n".join(c.source for c in nb.cells)
    yield from _docs()
    for path in sorted((ROOT / "autograder" / "checks").glob("*.py")):
        yield path, path.read_text()


def _docs():
    """README.md and the documentation site's own pages (the chapters' copies are built)."""
    yield ROOT / "README.md", (ROOT / "README.md").read_text()
    for path in sorted((ROOT / "docs").rglob("*.md")):
        if path.relative_to(ROOT / "docs").parts[0] not in ("_build", "chapters"):
            yield path, path.read_text()


def test_no_seed_numbers_in_what_students_read():
    found = [
        f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p, text in _texts()
        for m in SEED_NUMBER.finditer(text)
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("folder", ["solutions", "notebooks"])
def test_chapter_1_sources_section_defines_the_five_texts(folder):
    nb, cell = _sources_cell(folder)
    tags = _defined_tags(cell.source)
    assert sorted(tags) == [1, 2, 3, 4, 5], tags
    for block in re.split(r"^### ", cell.source, flags=re.MULTILINE)[1:]:
        # each text: what it is (a paragraph), its notation, the passages the course quotes
        assert "**Notation.**" in block and "**Quoted**" in block, block[:60]
        quoted = block.split("**Quoted**", 1)[1]
        assert quoted.count('"') >= 2 or "$$" in quoted, f"nothing quoted in {block[:40]!r}"
    intro = nb.cells[0].source
    for n in tags:
        assert f"[S{n}]" in intro, f"the introduction does not list [S{n}]"
    assert "**Sources**" in intro  # and points to the section


def test_every_citation_in_the_chapters_is_defined_in_sources():
    defined = _defined_tags(_sources_cell()[1].source)
    used, undefined = set(), []
    for path, text in _learner_texts():
        for m in CITATION.finditer(text):
            used.add(int(m.group(1)))
            if int(m.group(1)) not in defined or not m.group(0).startswith("[S"):
                undefined.append(f"{path.relative_to(ROOT)}: {m.group(0)!r}")
    assert not undefined, "\n".join(undefined)
    assert used == set(defined), f"tags defined but never cited: {set(defined) - used}"


def test_no_chapter_describes_a_source_at_length_or_without_its_tag():
    found = []
    for path, text in _learner_texts():
        flat = re.sub(r"\n[ \t]*#[ \t]*", " ", text)  # comment lines of the .py sources
        for pattern in (LONG_FORM, BARE):
            for m in pattern.finditer(flat):
                where = flat[max(0, m.start() - 30):m.end() + 10]
                found.append(f"{path.relative_to(ROOT)}: {where!r}")
    assert not found, "\n".join(found)


def test_the_patterns_catch_what_they_are_for():
    """The regexes above would catch the old wording and let the new one through."""
    old = ("The Transformer-block blog post (§7) observes", "the column-vector\n# lecture notes'",
           "(the encoder-decoder survey)", "the row-form tutorial", "the personal wiki page")
    assert all(LONG_FORM.search(t) for t in old)
    assert all(BARE.search(t) for t in ("The survey writes", "the lecture notes' heads"))
    ok = ("The blog post [S5, §7] observes", "the survey [S4]", "[S1] the lecture notes",
          "[S4]'s additive mask", "the row-form `scaled_dot_product_attention`")
    assert not any(LONG_FORM.search(t) or BARE.search(t) for t in ok)
    assert [m.group(1) for m in CITATION.finditer("[S5, §7] [S 6] [s2] [S1]")] == [
        "5", "6", "2", "1"]


def test_the_docs_have_the_same_sources_section():
    page = (ROOT / "docs" / "reference" / "sources.md").read_text()
    body = _sources_cell()[1].source.split("\n", 1)[1].strip()
    assert body in page
    for path, text in _docs():
        assert not LONG_FORM.search(text), path


def test_chapter_7_helpers_are_given_in_a_locked_cell():
    nb = nbformat.read(ROOT / "notebooks/07_bpe/07_bpe.ipynb", as_version=4)
    for helper in ("def pretoken_counts(", "def merge_ids("):
        (cell,) = [c for c in nb.cells if helper in c.source]
        meta = cell.metadata.get("nbgrader", {})
        assert meta.get("locked") and not meta.get("solution"), helper


def test_trial_text_fixes():
    def text(name):
        nb = nbformat.read(ROOT / f"notebooks/{name}/{name}.ipynb", as_version=4)
        return "\n".join(c.source for c in nb.cells)

    assert "a bias for each" not in text("05_feed_forward_blocks")  # SwiGLU has none (Ex 1.4)
    assert "no better than chance" not in text("08_training")  # a loss above log V is worse
    ch6 = text("06_transformer")
    assert "returns an empty `KVCache`" in ch6 and "no `len()`" in ch6


SEED_AS_SOURCE = re.compile(r"\b[Tt]he\s+seed(?:'s)?\b(?!\s+(?:of|for|value|number)\b)")


def test_no_chapter_calls_a_source_the_seed():
    """Issue 49: chapter 04 said "the seed's scalar" of [S1]; the course names its five
    sources [S1]-[S5], and "seed" is no name of them."""
    assert SEED_AS_SOURCE.search("the seed's scalar") and SEED_AS_SOURCE.search("The seed also")
    assert not SEED_AS_SOURCE.search("the seed of the generator")
    found = [f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p, text in _chapters()
             for m in SEED_AS_SOURCE.finditer(text)]
    assert not found, "\n".join(found)


def test_chapter_1_attention_caption_states_each_shape_the_figure_shows():
    """Issue 49: the figure said every matrix after S has one column per key, which Y = AV
    (T_q × d_v) has not; the caption promised a shape after each step."""
    from autograder import diagrams

    svg = diagrams.attention()
    assert "every matrix after S" not in svg and "Y one row per query" in svg
    nb = nbformat.read(ROOT / "notebooks/01_attention/01_attention.ipynb", as_version=4)
    (cell,) = [c for c in nb.cells if "figures/attention.svg" in c.source]
    caption = cell.source.split("figures/attention.svg)", 1)[1].strip().split("\n\n")[0]
    assert r"$Y = AV$ is" in caption and r"$T_q \times d_v$" in caption
    assert r"$T_q \times T_k$" in caption and "after each step" not in caption


def test_every_display_formula_is_closed():
    """Issue 49: [S3]'s formula in chapter 1's Sources opened ``$$`` and never closed it, so
    JupyterLab and the site showed raw LaTeX. Every Markdown cell of every chapter, and every
    docs page, holds an even number of ``$$``."""
    odd = []
    for path in sorted((ROOT / "notebooks").glob("*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        odd += [f"{path.name} cell {i}" for i, c in enumerate(nb.cells)
                if c.cell_type == "markdown" and c.source.count("$$") % 2]
    odd += [str(p.relative_to(ROOT)) for p in sorted((ROOT / "docs").rglob("*.md"))
            if "_build" not in p.parts and p.read_text().count("$$") % 2]
    assert odd == []
