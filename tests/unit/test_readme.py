"""README.md is a page that guides (issue 50): the two set-up commands first, at most 200 lines,
and links into the documentation site (``docs/``) that lead to pages that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")  # a Markdown link's target


def local_links(text: str) -> list[str]:
    """The targets of ``text``'s Markdown links that stay in the repository (no scheme, no
    bare ``#anchor``), without their ``#anchor``.

    >>> local_links("[a](docs/x.md#y) [b](https://e.org/) [c](#top) [d](../z.py)")
    ['docs/x.md', '../z.py']
    """
    found = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        found.append(target.split("#", 1)[0])
    return found


def test_readme_opens_with_the_two_commands_and_stays_short():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    first_block = text.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert [ln.split("#")[0].strip() for ln in first_block] == [
        "python3 -m autograder.bootstrap lab", "python3 -m autograder.bootstrap test"]
    assert text.index("```bash") < text.index("\n## ")  # before any section


def test_readme_links_lead_to_files_that_exist():
    targets = local_links(README.read_text())
    assert any(t.startswith("docs/guides/") for t in targets)  # the three paths into the docs
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
