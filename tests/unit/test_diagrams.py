"""The course's diagrams (``autograder/diagrams.py``): well-formed SVG, the same bytes on every
run, shown by their chapter, committed next to both notebooks and carried into the student
kit; and chapter 06's trained attention map shows the weights the model really uses."""

from __future__ import annotations

import ast
import math
import re
import shutil
import xml.etree.ElementTree as ET

import nbformat
import pytest
import torch

from autograder import diagrams, kit, release

from helpers.generation import generate_once

SVG = "{http://www.w3.org/2000/svg}"
DRAWN = sorted({(ch, name) for ch, names in diagrams.FIGURES.items() for name in names})
LINK = re.compile(r"!\[[^\]]+\]\(figures/([^)\s]+)\)")


def _markdown(folder, chapter) -> str:
    nb = nbformat.read(folder / chapter / f"{chapter}.ipynb", as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


@pytest.mark.parametrize(("chapter", "name"), DRAWN)
def test_each_diagram_is_well_formed_svg_and_byte_stable(chapter, name):
    text = diagrams.figures(chapter)[name]
    root = ET.fromstring(text)
    assert root.tag == f"{SVG}svg"
    w, h = int(root.get("width")), int(root.get("height"))
    assert root.get("viewBox") == f"0 0 {w} {h}" and 300 <= w <= 1200 and 200 <= h <= 700
    assert root.find(f"{SVG}title").text.strip(), "a title for screen readers"
    labels = "".join(root.itertext())
    assert "_{" not in labels and "^{" not in labels, "markup left in a label"
    assert diagrams.figures(chapter)[name] == text  # the same bytes again
    for el in root.iter():  # integer coordinates only: no float formatting to drift
        for attr in ("x", "y", "width", "height", "cx", "cy"):
            if el.get(attr) is not None:
                assert re.fullmatch(r"-?\d+", el.get(attr)), (el.tag, attr, el.get(attr))


@pytest.mark.parametrize(("chapter", "name"), DRAWN)
def test_each_diagram_is_committed_in_both_trees_and_shown_by_its_chapter(chapter, name):
    text = diagrams.figures(chapter)[name].encode()
    for folder in (release.SOURCE, release.RELEASE):
        path = folder / chapter / release.FIGURES / name
        assert path.read_bytes() == text, f"{path}: run `python -m autograder.release {chapter}`"
        assert name in LINK.findall(_markdown(folder, chapter)), f"{chapter} never shows {name}"


@pytest.mark.parametrize("chapter", release.chapters())
def test_every_figure_link_points_to_a_drawn_figure_and_nothing_else_is_there(chapter):
    drawn = sorted(diagrams.FIGURES.get(chapter, {}))
    for folder in (release.SOURCE, release.RELEASE):
        linked = sorted(set(LINK.findall(_markdown(folder, chapter))))
        assert linked == drawn, (folder.name, chapter)
        present = folder / chapter / release.FIGURES
        names = sorted(p.name for p in present.iterdir()) if present.exists() else []
        assert names == drawn, (folder.name, chapter)


def test_the_check_finds_a_stale_and_a_missing_figure(tmp_path, monkeypatch):
    name = "01_attention"
    for folder in ("solutions", "notebooks"):
        shutil.copytree(release.ROOT / folder / name, tmp_path / folder / name)
    monkeypatch.setattr(release, "SOURCE", tmp_path / "solutions")
    monkeypatch.setattr(release, "RELEASE", tmp_path / "notebooks")
    # only generated files change below, never the source: nbgrader runs once
    runs = generate_once(monkeypatch, tmp_path / "generated")
    assert release.differences([name], source=tmp_path / "solutions") == []
    stale = tmp_path / "solutions" / name / "figures" / "attention.svg"
    stale.write_text(stale.read_text().replace("Attention", "Atention"))
    (tmp_path / "notebooks" / name / "figures" / "attention.svg").unlink()
    (tmp_path / "notebooks" / name / "figures" / "old.svg").write_text("<svg/>")
    assert release.differences([name], source=tmp_path / "solutions") == [
        f"solutions/{name}/figures/attention.svg",
        f"notebooks/{name}/figures/attention.svg",
        f"notebooks/{name}/figures/old.svg",
    ]
    assert runs == [[name]]


def test_the_bpe_diagram_learns_from_chapter_7s_example_text():
    source = release.chapter_source("07_bpe").read_text()
    words = re.search(r'seed_text = \(((?:"[^"]*"\s*)+)\)', source)[1]
    assert "".join(re.findall(r'"([^"]*)"', words)) == diagrams.BPE_TEXT
    svg = diagrams.bpe_merges()
    assert "result: ['low', 'est&lt;/w&gt;']" in svg  # chapter 7's encode_word example


def test_the_kit_holds_the_figures_its_notebooks_show(tmp_path):
    dest = tmp_path / "figures"
    for chapter in ("04_layer_norm", "05_feed_forward_blocks"):  # both show pre_post_ln.svg
        kit._copy_figures(release.RELEASE / chapter / "figures", dest)
    assert sorted(p.name for p in dest.iterdir()) == ["pre_post_ln.svg"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "pre_post_ln.svg").write_text("<svg/>")
    with pytest.raises(kit.KitError, match="different figures/pre_post_ln.svg"):
        kit._copy_figures(other, dest)


def _chapter_function(chapter: str, name: str):
    """The source of the top-level function ``name`` defined in a chapter's code cells."""
    nb = nbformat.read(release.SOURCE / chapter / f"{chapter}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and f"def {name}(" in cell.source:
            tree = ast.parse(cell.source)
            fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
            return ast.get_source_segment(cell.source, fn)
    raise AssertionError(f"{chapter} defines no {name}")


def test_chapter_6s_attention_map_is_the_weights_the_model_uses():
    """The demo recomputes softmax(QKᵀ/√d_k) from each block's projections; it must equal
    the weights transformer_ref's attention returns with need_weights=True."""
    import transformer_ref

    ns = {"torch": torch, "math": math, "gpt_logits": lambda idx, model: model(idx)}
    exec(_chapter_function("06_transformer", "attention_maps"), ns)
    torch.manual_seed(0)
    model = transformer_ref.GPT(transformer_ref.GPTConfig(
        vocab_size=11, block_size=13, n_layer=2, n_head=4, d_model=32)).eval()
    idx = torch.randint(0, 11, (3, 12))
    with torch.no_grad():
        maps = ns["attention_maps"](model, idx)
        want, x = [], model.wte(idx) + model.wpe(torch.arange(12))
        for blk in model.blocks:
            want.append(blk.attn(blk.norm1(x), is_causal=True, need_weights=True)[1])
            x = blk(x, is_causal=True)
    assert maps.shape == (2, 3, 4, 12, 12)
    torch.testing.assert_close(maps, torch.stack(want), rtol=1e-5, atol=1e-6)
    assert maps[0, 0, 0].triu(1).abs().max() == 0  # causal: no weight on a later key
