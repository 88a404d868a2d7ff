"""The class's settings kept in the output folder: ``OUT_DIR/settings.json``.

An option given on a run is the class's setting from then on; a later run that leaves it out
uses the kept one and says so, so a refresh without ``--submitted-at`` does not silently put a
late student's penalty back (issue 48, item 2). Kept: ``--late-penalty``, ``--roster`` and
``--submitted-at`` (their files, by absolute path: they are read again each run). Due dates
live in the gradebook (``--due``), the assignments graded in ``OUT_DIR/source/``.

>>> resolve({"late_penalty": None, "roster": None, "submitted_at": None},
...         {"late_penalty": "none"})
({'late_penalty': 'none', 'roster': None, 'submitted_at': None}, ['--late-penalty none'])
"""

from __future__ import annotations

import json
import os
from pathlib import Path

SETTINGS = "settings.json"
DEFAULTS = {"late_penalty": "zero", "roster": None, "submitted_at": None}
OPTIONS = {"late_penalty": "--late-penalty", "roster": "--roster",
           "submitted_at": "--submitted-at"}


def read(out: Path | None) -> dict:
    """The settings ``OUT_DIR`` keeps ({} when none, or a file of another shape)."""
    try:
        found = json.loads((out / SETTINGS).read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return {}
    return {k: v for k, v in found.items() if k in DEFAULTS and isinstance(v, str)} \
        if isinstance(found, dict) else {}


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
    kept = {k: str(Path(v).resolve()) if k != "late_penalty" else v
            for k, v in settings.items() if k in DEFAULTS and v is not None}
    path = out / SETTINGS
    tmp = path.with_name(f".{SETTINGS}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
