"""Feedback that nbgrader's exchange can carry back (``nbgrader release_feedback``).

``nbgrader submit`` writes a random ``submission_secret.txt`` next to the student's notebooks,
in the exchange and in the student's own cache; ``nbgrader collect`` copies it into the
course's ``submitted/<student>/<assignment>/``. ``nbgrader release_feedback`` reads, for each
``feedback/<student>/<assignment>/<notebook>.html``, that folder's ``timestamp.txt`` and
``submission_secret.txt`` (a missing one stops it) and publishes the page in the exchange as
``md5(secret + notebook).html``; ``nbgrader fetch_feedback`` finds it there with the secret of
the student's cache. So a page reaches exactly the student whose submission held the secret.

course-grade grades a rebuilt copy of each notebook, never the folder as collected, so it
carries the secret itself: into ``OUT_DIR/submitted/<student>/<assignment>/`` (kept there for
later runs that regrade from OUT_DIR) and, with the submission's time, into the feedback
folder. A submission that did not come through the exchange has no secret and its feedback
folder gets neither file (nbgrader could not deliver it: the student's cache has no match).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from .submissions import IntakeProblem, read_bounded

SECRET = "submission_secret.txt"
STAMP = "timestamp.txt"
# nbgrader's secret is secrets.token_hex(64); anything else in the file is not one of its
_SECRET_RE = re.compile(r"[0-9a-f]{16,256}")


def read_secret(folder: Path) -> str | None:
    """The ``submission_secret.txt`` of ``folder`` as ``nbgrader submit`` writes it (hex
    digits), else None: a link, a special or large file, or other text is not read as one.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / SECRET).write_text("ab" * 64)
    >>> read_secret(d) == "ab" * 64, read_secret(d / "none")
    (True, None)
    >>> _ = (d / SECRET).write_text("../../x")
    >>> read_secret(d) is None
    True
    """
    try:
        text = read_bounded(folder / SECRET, 1024).decode("ascii").strip()
    except (IntakeProblem, OSError, UnicodeDecodeError):
        return None
    return text if _SECRET_RE.fullmatch(text) else None


def nbgrader_time(at: datetime) -> str:
    """A time as nbgrader writes ``timestamp.txt`` (``%Y-%m-%d %H:%M:%S.%f %Z``, UTC).

    >>> from datetime import UTC
    >>> nbgrader_time(datetime(2026, 12, 7, 21, 0, 1, 5, tzinfo=UTC))
    '2026-12-07 21:00:01.000005 UTC'
    """
    from datetime import UTC

    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def carry(origins: list[Path], staging: Path, student: str, assignments: list[str],
          times: dict[str, datetime]) -> int:
    """Put the exchange's files of each of ``assignments`` into the student's graded folders
    under ``staging`` (before they replace OUT_DIR's: ``ledger.publish``).

    The secret is the first found in ``origins``' ``<assignment>/`` folders (nbgrader's
    ``submitted/<student>/`` when the run grades it, then OUT_DIR's own copy from an earlier
    run). It goes into ``submitted/<student>/<assignment>/`` and, where that assignment has a
    feedback page, into ``feedback/<student>/<assignment>/`` with ``timestamp.txt`` (``times``:
    the submission's time; empty where unknown: nbgrader only logs it). Returns how many
    feedback folders can be released."""
    released = 0
    for a in assignments:
        secret = next((s for o in origins if (s := read_secret(o / a)) is not None), None)
        if secret is None:
            continue
        submitted = staging / "submitted" / student / a
        if submitted.is_dir():
            (submitted / SECRET).write_text(secret)
        feedback = staging / "feedback" / student / a
        if feedback.is_dir() and any(feedback.glob("*.html")):
            (feedback / SECRET).write_text(secret)
            (feedback / STAMP).write_text(nbgrader_time(times[a]) if a in times else "")
            released += 1
    return released
