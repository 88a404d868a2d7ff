"""The class's settings kept in the output folder: ``OUT_DIR/settings.json``.

An option given on a run is the class's setting from then on; a later run that leaves it out
uses the kept one and says so, so a refresh without ``--submitted-at`` does not silently put a
late student's penalty back (issue 48, item 2). Kept: the late policy (``--late-penalty``,
``--late-floor``, ``--grace``), ``--roster``, ``--submitted-at`` and ``--extensions`` (their
files, by absolute path: they are read again each run). Due dates live in the gradebook
(``--due``), the assignments graded in ``OUT_DIR/source/``.

>>> resolve({"late_penalty": None, "grace": "15m"}, {"late_penalty": "none", "grace": "1h"})[1]
['--late-penalty none']
"""

from __future__ import annotations

import json
import os
from pathlib import Path

SETTINGS = "settings.json"
DEFAULTS = {"late_penalty": "zero", "late_floor": None, "grace": None, "roster": None,
            "submitted_at": None, "extensions": None}
OPTIONS = {"late_penalty": "--late-penalty", "late_floor": "--late-floor", "grace": "--grace",
           "roster": "--roster", "submitted_at": "--submitted-at", "extensions": "--extensions"}
FILES = ("roster", "submitted_at", "extensions")  # kept by absolute path


def read(out: Path | None) -> dict:
    """The settings ``OUT_DIR`` keeps ({} when none, or a file of another shape); the late
    penalty of a class graded before settings.json kept it is its nbgrader_config.py's."""
    try:
        found = json.loads((out / SETTINGS).read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        found = {}
    kept = {k: v for k, v in found.items() if k in DEFAULTS and isinstance(v, str)} \
        if isinstance(found, dict) else {}
    if "late_penalty" not in kept and out is not None and \
            (method := legacy_penalty(out / "nbgrader_config.py")):
        kept["late_penalty"] = method
    return kept


def legacy_penalty(config: Path) -> str | None:
    """The ``LateSubmissionPlugin.penalty_method`` an older course-grade wrote into OUT_DIR's
    nbgrader_config.py (``none`` or ``zero``), if any."""
    import re

    try:
        text = config.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    found = re.findall(r"^c\.LateSubmissionPlugin\.penalty_method = '(none|zero)'$", text, re.M)
    return found[-1] if found else None


def resolve(given: dict, stored: dict) -> tuple[dict, list[str]]:
    """(this run's settings, the kept ones it uses, as options): what the command line
    gives (not None) wins; else the kept setting; else the default."""
    settings, kept = {}, []
    for key, default in DEFAULTS.items():
        if given.get(key) is not None:
            settings[key] = given[key]
        elif stored.get(key) is not None:
            settings[key] = stored[key]
            kept.append(f"{OPTIONS[key]} {stored[key]}")
        else:
            settings[key] = default
    return settings, kept


def write(out: Path, settings: dict) -> Path:
    """Keep ``settings`` in ``OUT_DIR/settings.json`` (atomically; paths made absolute)."""
    kept = {k: str(Path(v).resolve()) if k in FILES else v
            for k, v in settings.items() if k in DEFAULTS and v is not None}
    path = out / SETTINGS
    tmp = path.with_name(f".{SETTINGS}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
