"""Find the students and their notebooks in a folder downloaded from an LMS.

``SUBMISSIONS_DIR`` holds one folder or one ``.zip`` per student; the folder/zip name is the
student id. Inside, notebooks are found by name at any depth (LMS downloads nest folders and
rename files): ``01_attention.ipynb`` first, else a name that contains ``01_attention``
(``01_attention (1).ipynb``, ``jdoe_01_attention.ipynb``). Editor debris
(``.ipynb_checkpoints``, ``__MACOSX``, hidden folders) is skipped.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

MAX_UNZIPPED_BYTES = 512 * 2**20  # a zip bomb stops here


@dataclass
class Submission:
    student: str
    path: Path  # a folder holding the submission's files (a zip is unpacked into one)
    origin: Path  # what the instructor gave us (folder or .zip)


def student_id(name: str) -> str:
    """A path- and nbgrader-safe student id from a file name.

    >>> student_id("Ada Lovelace (ada@uni.edu)")
    'Ada_Lovelace_ada_uni.edu'
    """
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "student"


def _safe_unzip(zip_path: Path, dest: Path) -> None:
    """Unpack ``zip_path`` into ``dest``, refusing paths outside it and stopping at a size cap."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    total = 0
    root = dest.resolve()
    with zipfile.ZipFile(zip_path) as zf:
        for info in zf.infolist():
            target = (dest / info.filename).resolve()
            if not target.is_relative_to(root) or info.is_dir():
                continue
            total += info.file_size
            if total > MAX_UNZIPPED_BYTES:
                raise ValueError(f"unpacks to more than {MAX_UNZIPPED_BYTES >> 20} MB")
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)


def discover(submissions_dir: Path, unpack_dir: Path) -> tuple[list[Submission], list[str]]:
    """Every student's submission, sorted by id, and a list of problems met on the way."""
    subs, problems, seen = [], [], set()
    for entry in sorted(submissions_dir.iterdir()):
        if entry.name.startswith(".") or entry.name == "__MACOSX":
            continue
        if entry.is_dir():
            sid, path = student_id(entry.name), entry
        elif entry.suffix.lower() == ".zip":
            sid = student_id(entry.stem)
            path = unpack_dir / sid
            try:
                _safe_unzip(entry, path)
            except (zipfile.BadZipFile, ValueError, OSError) as e:
                problems.append(f"{entry.name}: cannot unpack ({e})")
                path = None
        else:
            problems.append(f"{entry.name}: neither a folder nor a .zip, skipped")
            continue
        if sid in seen:
            problems.append(f"{entry.name}: a second submission for student {sid!r}, skipped")
            continue
        seen.add(sid)
        subs.append(Submission(sid, path, entry))
    return subs, problems


def _candidates(folder: Path) -> list[Path]:
    out = []
    for p in folder.rglob("*.ipynb"):
        rel = p.relative_to(folder).parts
        if any(part.startswith(".") or part == "__MACOSX" for part in rel):
            continue
        if p.is_file():
            out.append(p)
    return out


def find_notebook(sub: Submission, name: str) -> tuple[Path | None, str]:
    """The submission's notebook for notebook id ``name`` and a note on how it was chosen."""
    if sub.path is None:
        return None, "the submission could not be unpacked"
    cands = _candidates(sub.path)
    exact = [p for p in cands if p.stem == name]
    loose = [p for p in cands if name in p.stem and p not in exact]
    for group in (exact, loose):
        if group:
            # the shallowest, then the most recently changed, then by name: deterministic
            group.sort(key=lambda p: (len(p.relative_to(sub.path).parts), -p.stat().st_mtime, p))
            note = "" if len(group) == 1 else f"{len(group)} candidates, took {group[0].name}"
            return group[0], note
    return None, f"no {name}.ipynb in the submission"


def fingerprint(paths: list[Path | None]) -> str:
    """A hash of the chosen notebooks' bytes: a changed submission is graded again."""
    h = hashlib.sha256()
    for p in paths:
        h.update(b"-" if p is None else p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]
