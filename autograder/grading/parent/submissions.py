"""Find the students and their notebooks in a folder downloaded from an LMS.

``SUBMISSIONS_DIR`` is read in one of these layouts (they may be mixed):

- **one folder or one ``.zip`` per student** (the folder/zip name is the student);
- **Canvas** "Download Submissions": loose files ``<name>_<userid>_<submissionid>_<file>``
  (``<name>_LATE_<userid>_...`` when Canvas marked it late; a re-uploaded file name gets
  ``-1``, ``-2`` before its extension), or one ``.zip`` of them;
- **Moodle** "Download submissions in folders": folders
  ``<Full Name>_<participantid>_assignsubmission_file[_]`` (or the zip of them); the flat
  Moodle download ``<Full Name>_<participantid>_assignsubmission_file_<file>`` too;
- an LMS download unpacked into a folder of its own (``submissions/`` next to
  ``submissions.zip``): a folder whose entries all name Canvas or Moodle users, two or more.

Inside a submission, notebooks are found by name at any depth: ``01_attention.ipynb`` first,
else a name that contains ``01_attention`` (``01_attention (1).ipynb``,
``jdoe_01_attention.ipynb``). Editor debris (``.ipynb_checkpoints``, ``__MACOSX``, hidden
folders) is skipped.

Intake never stops the class and never loses a student: every entry yields a
:class:`Submission`, with ``problem`` set when it cannot be graded (encrypted, unsupported or
corrupt zip, a link or a special file, ...); its rows are then ``not graded: <problem>``.
Links and special files are never followed or opened (``lstat``, ``O_NOFOLLOW``), and the
parent reads no file without a size cap (:func:`read_bounded`; a notebook's cells are read in a
limited process of their own: ``sent.py``).

A submission's time is never read here: file and zip entry times are the unpacking's or the
student's, and a ``timestamp.txt`` in an upload is the student's; ``times.py`` takes times from
trusted sources only. Canvas's ``LATE`` mark is kept (``late_marked``, ``late_files``).

Student ids (:func:`student_id`) keep Unicode letters (NFC), are path- and nbgrader-safe and
stable across reruns; where an LMS gives a user id it is part of the id (``José_Núñez_1002``).
The same LMS user found twice (an LMS download's zip next to its unpacked files, or an
unpacked download in a folder of its own) is one student, graded once under the id it has
alone; the copy skipped is named in the messages. Two different entries that would get the
same id are told apart by a short hash of their origin's name, never dropped; an LMS user's
id is never the one changed.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import shutil
import stat
import unicodedata
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

MAX_UNZIPPED_BYTES = 512 * 2**20  # an LMS download's zip (the whole class) stops here
# what one submission's own zips may unpack, all of them together: only their notebooks are
# unpacked (2 notebooks at MAX_NOTEBOOK_BYTES; the course's are ~60 kB without outputs)
MAX_SUBMISSION_BYTES = 64 * 2**20
MAX_ZIP_ENTRIES = 10_000  # ... and a zip of a million empty files here
MAX_NOTEBOOK_BYTES = 32 * 2**20  # the course's notebooks are ~60 kB without outputs
MAX_CELLS = 2_000  # the longest chapter has 60 cells
MAX_NESTING = 64  # a notebook's JSON nests ~8 deep
MAX_WALK_ENTRIES = 100_000  # files and folders looked at inside one submission
MAX_ID_CHARS = 64

_SUPPORTED_COMPRESSION = {
    zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA
}
_CANVAS = re.compile(r"^(?P<name>.+?)_(?P<late>late_)?(?P<uid>\d+)_(?P<subid>\d+)_(?P<file>.+)$",
                     re.IGNORECASE)
_MOODLE_DIR = re.compile(r"^(?P<name>.+)_(?P<uid>\d+)_assignsubmission_(?P<plugin>[a-z]+)_?$")
_MOODLE_FILE = re.compile(r"^(?P<name>.+)_(?P<uid>\d+)_assignsubmission_file_(?P<file>.+)$")
# the names Canvas ("submissions.zip") and Moodle ("<course>-<assignment>-<id>.zip") give their
# downloads (a browser adds " (1)" to a second copy): only a zip so named is read as one
_DOWNLOAD_ZIP = re.compile(r"^(submissions|.+-\d+)( \(\d+\))?\.zip$", re.IGNORECASE)
# what operating systems, editors and version control leave next to the submissions
_DEBRIS = {".DS_Store", "__MACOSX", ".ipynb_checkpoints", ".git", "Thumbs.db", "desktop.ini",
           ".directory", ".localized"}
_RESUBMITTED = re.compile(r"^(?P<stem>.+)-(?P<n>\d+)(?P<ext>\.[^.]+)$")


@dataclass
class Submission:
    student: str  # stable id: Unicode letters kept (NFC), path- and nbgrader-safe, unique
    path: Path | None  # folder holding the files (a zip unpacked into one); None if unusable
    origin: Path  # what the instructor gave (folder, zip, or LMS file group)
    name: str = ""  # display name as the layout gives it ("José Núñez", "李娜")
    lms_id: str = ""  # LMS user id where the layout has one
    lms: str = ""  # "canvas" / "moodle": the LMS whose download named the student
    sis_id: str = ""  # from ``--roster`` (roster.py): the SIS ids and section of a Canvas user
    sis_login: str = ""
    section: str = ""
    late_marked: bool = False  # the LMS marked it late (Canvas's LATE)
    problem: str = ""  # non-empty: cannot be graded; every row 'not graded: <problem>'
    links: list[str] = field(default_factory=list)  # link entries of a zip, not unpacked
    # files gathered from LMS files marked LATE (their names under ``path``)
    late_files: set[str] = field(default_factory=set)
    # of files gathered from a Canvas download: their names under ``path`` -> the download's
    # name prefix (``lovelaceada_LATE_1001_5000``), which Canvas's re-upload reads back
    canvas_files: dict[str, str] = field(default_factory=dict)
    # assignment ("" = every assignment) -> tz-aware time, from a trusted source only (times.py)
    times: dict[str, datetime] = field(default_factory=dict)
    time_source: str = ""  # "nbgrader timestamp.txt" / "--submitted-at"; "" when unknown
    # a student folder of nbgrader's submitted/ (times.from_nbgrader): assignment A's notebooks
    # come only from <student>/A/, the folder whose timestamp.txt is A's time
    per_assignment: bool = False
    # an LMS download is one assignment's (:func:`one_assignment`): the download it came from
    # and its assignment; only that assignment's notebooks come from it ("": undecided, none)
    download: str = ""
    download_of: str | None = None


class IntakeProblem(Exception):
    """An entry or a notebook that cannot be graded; the message is the row's reason."""


# ---- student ids ----------------------------------------------------------------------------


def _keep(ch: str) -> bool:
    return ch in "._-" or unicodedata.category(ch)[0] in "LNM"  # letters, digits, marks


def student_id(name: str) -> str:
    """A path- and nbgrader-safe student id: letters, digits, marks (NFC) and ``._-`` kept,
    the rest ``_`` (nbgrader reads ``--student`` as a glob, ``student_id_exclude`` as a comma
    list); no leading dot; at most 64 characters (cut, plus a hash); never purely numeric.

    >>> student_id("Ada Lovelace (ada@uni.edu)"), student_id("Zoë"), student_id("李娜")
    ('Ada_Lovelace_ada_uni.edu', 'Zoë', '李娜')
    """
    nfc = unicodedata.normalize("NFC", name)
    sid = "".join(ch if _keep(ch) else "_" for ch in nfc)
    sid = re.sub(r"_+", "_", sid).strip("._-")
    if len(sid) > MAX_ID_CHARS:
        sid = sid[: MAX_ID_CHARS - 9].rstrip("._-") + "_" + _short_hash(nfc)
    if not sid:
        return "student"
    return f"s{sid}" if sid.isdigit() else sid


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:8]


def _display(name: str) -> str:
    """The name to show: NFC, undecodable bytes as U+FFFD, no control characters.

    >>> _display(" Zoe\u0308\x1b[31m\t")
    'Zoë[31m'
    """
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cc")
    return unicodedata.normalize("NFC", text).strip()


# ---- bounded, link-free reading ------------------------------------------------------------


def not_regular(st: os.stat_result) -> str:
    """'' for a regular file, else what it is ('a symbolic link (not followed)', ...)."""
    mode = st.st_mode
    for test, what in ((stat.S_ISREG, ""), (stat.S_ISLNK, "a symbolic link (not followed)"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device file"),
                       (stat.S_ISBLK, "a device file"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def _refuse(path: Path, st: os.stat_result, cap: int) -> None:
    if what := not_regular(st):
        raise IntakeProblem(f"{path.name} is {what}")
    if st.st_size > cap:
        raise IntakeProblem(f"{path.name} is larger than {_mb(cap)}")


def open_bounded(path: Path, cap: int) -> int:
    """A descriptor of the regular file ``path`` of at most ``cap`` bytes, else
    :class:`IntakeProblem`: links and special files are refused by ``lstat`` before the open,
    which uses ``O_NOFOLLOW | O_NONBLOCK`` (one swapped in between is not followed and cannot
    block), and again by ``fstat``."""
    _refuse(path, os.lstat(path), cap)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        _refuse(path, os.fstat(fd), cap)
    except IntakeProblem:
        os.close(fd)
        raise
    return fd


def read_bounded(path: Path, cap: int) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_bounded`); the read stops at
    ``cap + 1`` bytes."""
    fd = open_bounded(path, cap)
    try:
        chunks, left = [], cap + 1
        while left > 0 and (chunk := os.read(fd, min(left, 2**20))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > cap:  # it grew while we read
        raise IntakeProblem(f"{path.name} is larger than {_mb(cap)}")
    return data


def _mb(n: int) -> str:
    return f"{n / 2**20:g} MB"


def _mirror(src: Path, dest: Path) -> None:
    """Copy one LMS file so that the copy reads as the original would: a regular file up to
    :data:`MAX_NOTEBOOK_BYTES` is copied; a larger one becomes a sparse file of its size
    (refused later by size, never read); a link becomes the same link, a FIFO a FIFO (never
    followed or opened); other special files are left out."""
    st = os.lstat(src)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dest)
        return
    if stat.S_ISFIFO(st.st_mode):
        os.mkfifo(dest)
        return
    if not stat.S_ISREG(st.st_mode):
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    with os.fdopen(os.open(dest, flags, 0o644), "wb") as f:
        if st.st_size > MAX_NOTEBOOK_BYTES:
            f.truncate(st.st_size)
        else:
            f.write(read_bounded(src, MAX_NOTEBOOK_BYTES))
    os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


# ---- zips ------------------------------------------------------------------------------------


def _is_link(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def _is_special(info: zipfile.ZipInfo) -> bool:
    """A FIFO, device or socket entry (no type bits, as zips from Windows have: regular)."""
    kind = stat.S_IFMT(info.external_attr >> 16)
    return kind not in (0, stat.S_IFREG, stat.S_IFDIR, stat.S_IFLNK)


def _open_zip(zip_path: Path) -> zipfile.ZipFile:
    """The zip, opened through a link-free descriptor (raises IntakeProblem)."""
    st = os.lstat(zip_path)
    if what := not_regular(st):
        raise IntakeProblem(f"{zip_path.name} is {what}")
    try:
        fd = os.open(zip_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        f = os.fdopen(fd, "rb")
    except OSError as e:
        raise IntakeProblem(f"cannot open the zip ({e.strerror})") from None
    try:
        return zipfile.ZipFile(f)
    except zipfile.BadZipFile:
        f.close()
        raise IntakeProblem("not a zip file, or a damaged one") from None
    except Exception as e:  # noqa: BLE001 - anything a hostile header raises
        f.close()
        raise IntakeProblem(f"damaged zip ({type(e).__name__})") from None


class Budget:
    """The bytes that unpacking may still write for one submission (all its zips together),
    or for one LMS download: :meth:`take` raises :class:`IntakeProblem` past ``cap``."""

    def __init__(self, cap: int, problem: str):
        self.cap, self.left, self.problem = cap, cap, problem  # problem: "... {} ..." (cap)

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise IntakeProblem(self.problem.format(_mb(self.cap)))


_BOMB = "zip unpacks to more than {} (zip bomb?)"  # an LMS download's zip


def _submission_budget() -> Budget:
    return Budget(MAX_SUBMISSION_BYTES,
                  "the submission's zips unpack to more than {} of notebooks (zip bomb?)")


def _is_notebook(name: str) -> bool:
    return name.lower().endswith(".ipynb")


def _check_zip(zf: zipfile.ZipFile, wanted, budget: Budget) -> None:
    infos = zf.infolist()
    if len(infos) > MAX_ZIP_ENTRIES:
        raise IntakeProblem(f"zip holds more than {MAX_ZIP_ENTRIES} entries")
    if any(i.flag_bits & 0x1 for i in infos):
        raise IntakeProblem("encrypted zip (password-protected)")
    if any(i.compress_type not in _SUPPORTED_COMPRESSION for i in infos):
        raise IntakeProblem("zip uses an unsupported compression method")
    if sum(i.file_size for i in infos if _written(i, wanted)) > budget.left:
        budget.take(budget.left + 1)  # what its headers say is over: nothing written


def _written(info: zipfile.ZipInfo, wanted) -> bool:
    """Whether :func:`_safe_unzip` writes the entry's bytes (a notebook over the size cap is
    a sparse file of its size: nothing written)."""
    return not info.is_dir() and wanted(info.filename) and not (
        _is_notebook(info.filename) and info.file_size > MAX_NOTEBOOK_BYTES)


def _safe_unzip(zip_path: Path, dest: Path, budget: Budget | None = None,
                wanted=_is_notebook) -> list[str]:
    """Unpack the entries ``wanted`` accepts (a student's zip: its notebooks) into ``dest``;
    returns the names of the link entries, left out. Refuses (IntakeProblem) an encrypted,
    corrupt or unsupported zip, too many entries, or more bytes than ``budget`` has left (by
    the headers, then as written). Paths outside ``dest`` and special files are skipped; a
    notebook over :data:`MAX_NOTEBOOK_BYTES` becomes a sparse file of its size.
    """
    budget = budget or _submission_budget()
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    root = dest.resolve()
    links = []
    with _open_zip(zip_path) as zf:
        _check_zip(zf, wanted, budget)
        for info in zf.infolist():
            target = (dest / info.filename).resolve()
            if not target.is_relative_to(root) or target == root or info.is_dir():
                continue
            if _is_link(info):
                links.append(info.filename)
                continue
            if _is_special(info) or not wanted(info.filename):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            if not _written(info, wanted):
                with os.fdopen(os.open(target, flags, 0o644), "wb") as out:
                    out.truncate(info.file_size)
                continue
            try:
                with zf.open(info) as src, os.fdopen(os.open(target, flags, 0o644), "wb") as out:
                    while chunk := src.read(2**20):
                        budget.take(len(chunk))
                        out.write(chunk)
            except IntakeProblem:
                raise
            except NotImplementedError:
                raise IntakeProblem("zip uses an unsupported compression method") from None
            except RuntimeError as e:  # zipfile: "... is encrypted, password required"
                if "encrypt" in str(e) or "password" in str(e):
                    raise IntakeProblem("encrypted zip (password-protected)") from None
                raise IntakeProblem(f"corrupt zip ({type(e).__name__})") from None
            except Exception as e:  # noqa: BLE001 - bad CRC, zlib/lzma/bz2 errors, EOF
                kind = "CRC error" if "CRC" in str(e) else "damaged compressed data"
                raise IntakeProblem(f"corrupt zip ({kind})") from None
            # orders candidates of one notebook (find_notebook); never a submission time
            try:
                ts = datetime(*info.date_time, tzinfo=UTC).timestamp()
                os.utime(target, (ts, ts))
            except (ValueError, OverflowError):
                pass
    return links


# ---- walking a submission without following links ------------------------------------------


def _walk(folder: Path) -> list[tuple[Path, os.stat_result]]:
    """Every entry under ``folder`` with its ``lstat``, links never followed, debris skipped."""
    out, stack, seen = [], [folder], 0
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            seen += 1
            if seen > MAX_WALK_ENTRIES:
                return out
            if e.name.startswith(".") or e.name == "__MACOSX":
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            p = Path(e.path)
            if stat.S_ISDIR(st.st_mode):
                stack.append(p)
            else:
                out.append((p, st))
    return out


def _candidates(sub: Submission) -> list[tuple[Path, os.stat_result]]:
    files = [(p, st) for p, st in _walk(sub.path) if p.name.lower().endswith(".ipynb")]
    return files + [(sub.path / name, None) for name in sub.links
                    if name.lower().endswith(".ipynb")]


def find_notebook(sub: Submission, name: str,
                  assignment: str = "") -> tuple[Path | None, str]:
    """The submission's notebook ``name`` (of ``assignment``: in nbgrader's layout,
    ``sub.per_assignment``, only from the student's ``<assignment>/``) and a note on how it
    was chosen; a link or special file is never followed: None, and the note says so."""
    if sub.problem:
        return None, sub.problem
    if sub.path is None:
        return None, "the submission could not be unpacked"
    cands = _candidates(sub)
    if sub.per_assignment and assignment:
        cands = [(p, st) for p, st in cands if p.relative_to(sub.path).parts[0] == assignment]
    if sub.download_of is not None and assignment and assignment != sub.download_of:
        cands = []  # another assignment's LMS download: as if not handed in (the ledger keeps)
    stem = {p: p.name[: -len(".ipynb")] for p, _ in cands}
    exact = [(p, st) for p, st in cands if stem[p] == name]
    loose = [(p, st) for p, st in cands if name in stem[p] and stem[p] != name]
    for group in (exact, loose):
        if group:
            # the shallowest, then the most recently changed, then by name: deterministic
            group.sort(key=lambda c: (len(c[0].relative_to(sub.path).parts),
                                      -(c[1].st_mtime if c[1] else 0), c[0]))
            path, st = group[0]
            rel = path.relative_to(sub.path).as_posix()
            if st is None:
                return None, f"{rel} is a symbolic link in the zip (not followed)"
            if what := not_regular(st):
                return None, f"{rel} is {what}"
            note = "" if len(group) == 1 else f"{len(group)} candidates, took {path.name}"
            return path, note
    return None, missing(name)


def strays(sub: Submission, notebooks: dict[str, list[str]]) -> list[str]:
    """In nbgrader's layout (``sub.per_assignment``), each file :func:`find_notebook` would
    take for a notebook of ``notebooks`` ({assignment: [notebook]}) were it in that
    assignment's folder, but which lies elsewhere (another assignment's folder, a sub-folder
    named like the assignment, the top of the student's folder): never graded for it, since
    the time of its folder is another assignment's (issue 47). One console line each."""
    if sub.problem or sub.path is None:
        return []
    if sub.download_of:  # an LMS download (one_assignment): other assignments' notebooks
        return [f"{sub.lms}: {_lms_name(sub, p)} is in {sub.download_of}'s download: not "
                f"graded for {a}" for a, nbs in notebooks.items() if a != sub.download_of
                for nb in nbs if (p := find_notebook(sub, nb)[0]) is not None]
    if not sub.per_assignment:
        return []
    found = []
    for p, _ in _candidates(sub):
        rel, stem = p.relative_to(sub.path), p.name[: -len(".ipynb")]
        found += [f"{sub.student}: {rel.as_posix()} is not in {a}'s folder: not graded"
                  for a, nbs in notebooks.items()
                  if rel.parts[0] != a and any(nb in stem for nb in nbs)]
    return found


def _lms_name(sub: Submission, path: Path) -> str:
    rel = path.relative_to(sub.path).as_posix()
    prefix = sub.canvas_files.get(path.relative_to(sub.path).parts[0])
    return f"{prefix}_{rel}" if prefix else f"{sub.student}/{rel}"


def one_assignment(subs: list[Submission], notebooks: dict[str, list[str]],
                   given: list[str] | None = None) -> list[str]:
    """Decide each LMS download's assignment (``sub.download_of``): an LMS download is one
    assignment's. The one ``given`` (``--assignment``), else the one (of ``given``) whose
    notebook the most of its students handed in; a tie or none: "" (nothing of it graded).
    Returns the console's lines."""
    downloads: dict[str, list[Submission]] = {}
    for s in subs:
        if s.lms and s.path is not None and not s.problem:
            downloads.setdefault(s.download, []).append(s)
    choices = [a for a in notebooks if not given or a in given]
    lines = []
    for where, members in sorted(downloads.items()):
        count = {a: sum(any(find_notebook(s, nb)[0] for nb in notebooks[a]) for s in members)
                 for a in choices}
        top = sorted(count, key=lambda a: -count[a])
        most = [a for a in top if count[a] == count[top[0]]] if top else []
        of = most[0] if len(top) == 1 or len(most) == 1 and count[most[0]] else ""
        if not of:
            lines.append(f"{where}: an LMS download is one assignment's, and " + (
                f"as many of its students handed in {' and '.join(most)}" if most and count[
                    most[0]] else "it holds no notebook of an assignment") +
                ": nothing of it graded; name its assignment with --assignment")
        for s in members:
            s.download_of = of
    return lines


def missing(name: str) -> str:
    """find_notebook's note for a notebook of which the submission holds no file."""
    return f"no {name}.ipynb in the submission"


def canvas_names(sub: Submission, notebooks: dict[str, list[str]]) -> dict[str, str]:
    """{assignment: the Canvas name prefix of its first notebook found's file}
    (``{"01_attention": "lovelaceada_1001_5000"}``)."""
    found = {}
    for a, nbs in notebooks.items():
        for nb in nbs:
            path = find_notebook(sub, nb, a)[0] if sub.canvas_files and sub.path else None
            if path is not None and (
                    prefix := sub.canvas_files.get(path.relative_to(sub.path).parts[0])):
                found[a] = prefix
                break
    return found


def intake_facts(subs: list[Submission], notebooks: dict[str, list[str]]) -> dict[str, dict]:
    """{student: what this run's intake knows of them}, kept in their stored result (names,
    LMS and SIS ids, the Canvas names of ``notebooks``' files and the Moodle participant id of
    each assignment's download: ``results.write_returns``)."""
    return {s.student: {"name": s.name, "lms_id": s.lms_id, "lms": s.lms, "sis_id": s.sis_id,
                        "sis_login": s.sis_login, "section": s.section,
                        "canvas": canvas_names(s, notebooks),
                        "moodle": {a: s.lms_id for a, nbs in notebooks.items()  # per assignment
                                   if s.lms == "moodle" and s.path and any(
                                       find_notebook(s, nb, a)[0] for nb in nbs)}}
            for s in subs}


def fingerprint(paths: list[Path | None], problem: str = "") -> str:
    """A hash of the chosen notebooks' bytes: a changed submission is graded again."""
    h = hashlib.sha256(problem.encode())
    for p in paths:
        if p is None:
            h.update(b"-")
        else:
            try:
                h.update(read_bounded(p, MAX_NOTEBOOK_BYTES))
            except (IntakeProblem, OSError) as e:
                h.update(f"!{e}".encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


# ---- what is no student's work ---------------------------------------------------------------

COURSE_PROJECT = "transformers-from-scratch"  # pyproject.toml's [project] name


def _project_name(pyproject: Path) -> str:
    import tomllib

    try:
        data = tomllib.loads(read_bounded(pyproject, 2**20).decode("utf-8"))
        return str(data.get("project", {}).get("name", ""))
    except (IntakeProblem, OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        return ""


def _foreign(folder: Path) -> str:
    """What makes ``folder`` a course-grade output or this course's repository, '' if
    nothing (links not followed)."""
    def has(name: str, is_dir: bool) -> bool:
        try:
            mode = os.lstat(folder / name).st_mode
        except OSError:
            return False
        return stat.S_ISDIR(mode) if is_dir else stat.S_ISREG(mode)

    marks = [f"{n}/" for n in ("results", ".work") if has(n, True)]
    marks += [n for n in ("grades.csv", "gradebook.db") if has(n, False)]
    if len(marks) >= 2 or has(".work/unpacked", True):
        return f"a course-grade output ({', '.join(marks)})"
    marks = [f"{n}/" for n in ("autograder", "solutions") if has(n, True)]
    if has("pyproject.toml", False) and _project_name(folder / "pyproject.toml") == COURSE_PROJECT:
        marks.append(f"pyproject.toml naming {COURSE_PROJECT}")
    if len(marks) >= 2 or any(m.startswith("pyproject") for m in marks):
        return f"the course repository ({', '.join(marks)})"
    return ""


def not_submissions(folder: Path) -> list[str]:
    """Why ``folder`` is no submissions folder (this course's repository or a course-grade
    output); an entry in it that looks like either is still a student's (:func:`_classify`).
    """
    return [f"it is {what}"] if (what := _foreign(folder)) else []


# ---- the layouts -----------------------------------------------------------------------------


@dataclass
class _Entry:
    """One future Submission before its id is fixed."""

    kind: str  # folder | zip | canvas | moodle | problem
    base: str  # the id before disambiguation
    origin: Path
    name: str = ""
    lms_id: str = ""
    late: bool = False
    files: list[Path] = field(default_factory=list)  # LMS file group / Moodle folders
    problem: str = ""
    via: str = ""  # the LMS download (a zip or folder in the submissions folder) it is in


def _bundle_kind(zip_path: Path) -> str:
    """'canvas' / 'moodle' if a zip is a whole LMS download, else ''."""
    try:
        with _open_zip(zip_path) as zf:
            names = [i.filename for i in zf.infolist()[:MAX_ZIP_ENTRIES + 1]]
    except (IntakeProblem, OSError):
        return ""
    names = [n for n in names if n and not n.startswith("__MACOSX")]
    tops = {n.split("/", 1)[0] for n in names}
    if not tops:
        return ""
    if all("/" not in n and _CANVAS.match(n) for n in names):
        return "canvas"
    if all(_MOODLE_DIR.match(t) or _MOODLE_FILE.match(t) for t in tops):
        return "moodle"
    return ""


def _download_folder(folder: Path) -> bool:
    """Whether every entry of a folder is named as Canvas or Moodle name a student's files,
    for two students or more (an unpacked LMS download)."""
    try:
        names = [n for n in os.listdir(folder) if n not in _DEBRIS]
        kinds = {n: stat.S_ISDIR(os.lstat(folder / n).st_mode) for n in names}
    except OSError:
        return False
    users = set()
    for n, is_dir in kinds.items():
        m = _MOODLE_DIR.match(n) if is_dir else (_CANVAS.match(n) or _MOODLE_FILE.match(n))
        if not m:
            return False
        users.add(m["uid"])
    return len(users) > 1


def _classify(folder: Path, bundle_dir: Path, messages: list[str],
              depth: int = 0, via: str = "") -> list[_Entry]:
    entries: list[_Entry] = []
    nested: list[_Entry] = []  # those of the LMS downloads found in this folder
    canvas: dict[str, _Entry] = {}
    moodle: dict[str, _Entry] = {}
    try:
        names = sorted(os.listdir(folder))
    except OSError as e:
        messages.append(f"{folder}: cannot list ({e.strerror})")
        return []

    def entry(p: Path, kind: str, name: str, problem: str = "") -> _Entry:
        return _Entry(kind, student_id(name), p, name=_display(name), problem=problem)

    def lms_entry(p: Path, users: dict[str, _Entry], kind: str, m: re.Match) -> _Entry:
        e = users.setdefault(m["uid"], _Entry(
            kind, student_id(f"{_display(m['name'])}_{m['uid']}"), p,
            name=_display(m["name"]), lms_id=m["uid"]))
        e.files.append(p)
        return e

    for nm in names:
        p = folder / nm
        if nm in _DEBRIS:
            continue
        try:
            st = os.lstat(p)
        except OSError as e:
            entries.append(entry(p, "problem", nm, f"cannot read ({e.strerror})"))
            continue
        is_dir, is_reg = stat.S_ISDIR(st.st_mode), stat.S_ISREG(st.st_mode)
        stem = p.stem if is_reg and nm.lower().endswith(".zip") else nm
        if m := (_MOODLE_DIR if is_dir else _MOODLE_FILE).match(nm):
            lms_entry(p, moodle, "moodle", m)
        elif m := (not is_dir and _CANVAS.match(nm)):
            e = lms_entry(p, canvas, "canvas", m)
            e.late = e.late or bool(m["late"])
        elif is_dir:
            if depth == 0 and (what := _foreign(p)):
                messages.append(f"{nm}/ looks like {what}: graded as one student's folder")
            if depth == 0 and _download_folder(p):
                messages.append(f"{nm}/ holds files named as an LMS download names them: graded "
                                "as one student's folder (an LMS download is read only at the "
                                "top of SUBMISSIONS, or as its zip under the LMS's own name)")
            entries.append(entry(p, "folder", nm))
        elif is_reg and nm.lower().endswith(".zip"):
            kind = _bundle_kind(p) if depth == 0 else ""
            if kind and not _DOWNLOAD_ZIP.match(nm):
                messages.append(f"{nm} holds files named as a {kind.title()} download names them, "
                                "but the zip is not named as the LMS names its download "
                                "(submissions.zip, <course>-<assignment>-<id>.zip): graded as "
                                "one student's zip")
                kind = ""
            if kind:
                dest = bundle_dir / student_id(stem)
                try:
                    links = _safe_unzip(p, dest, Budget(MAX_UNZIPPED_BYTES, _BOMB),
                                        wanted=lambda name: True)
                except IntakeProblem as e:
                    entries.append(entry(p, "problem", stem, str(e)))
                    continue
                for link in links:
                    messages.append(f"{nm}: {link} is a symbolic link in the zip, skipped")
                nested += _classify(dest, bundle_dir, messages, depth + 1, via=nm)
            else:
                entries.append(entry(p, "zip", stem))
        elif is_reg:
            entries.append(entry(p, "problem", nm, "neither a folder nor a .zip"))
        else:
            entries.append(entry(p, "problem", nm, f"{nm} is {not_regular(st)}"))
    found = entries + list(canvas.values()) + list(moodle.values())
    for e in found:
        e.via = via
    return found + nested


def _upload(e: _Entry) -> int:
    """An entry's newest Canvas upload number (in its files' names), 0 elsewhere."""
    if e.kind != "canvas":
        return 0
    return max(int(m["subid"]) for p in e.files if (m := _CANVAS.match(p.name)))


def _digest(path: Path, st: os.stat_result) -> str:
    if what := not_regular(st):
        return what
    if st.st_size > MAX_NOTEBOOK_BYTES:  # no notebook: its size tells copies apart enough
        return f"{st.st_size} bytes"
    try:
        return hashlib.sha256(read_bounded(path, MAX_NOTEBOOK_BYTES)).hexdigest()
    except (IntakeProblem, OSError) as e:
        return f"unreadable ({e})"


def _contents(e: _Entry) -> list[tuple[str, str]]:
    """(name as in its LMS download, digest) of every file of an entry."""
    out = []
    for top in e.files:
        try:
            st = os.lstat(top)
        except OSError:
            continue
        found = _walk(top) if stat.S_ISDIR(st.st_mode) else [(top, st)]
        out += [(p.relative_to(top.parent).as_posix(), _digest(p, pst)) for p, pst in found]
    return sorted(out)


def _where(via: str) -> str:
    return via or "the submissions folder"


def _rank(e: _Entry) -> int:
    """0: at the top of the submissions folder; 1: in an unpacked download's folder; 2: in a
    download's zip."""
    return 0 if not e.via else 1 if e.via.endswith("/") else 2


def _listed(ids: list[str], most: int = 10) -> str:
    """The first ``most`` ids, then how many more.

    >>> _listed(["a", "b", "c"], most=2)
    'a, b and 1 more'
    """
    more = f" and {len(ids) - most} more" if len(ids) > most else ""
    return ", ".join(ids[:most]) + more


def _one_per_student(entries: list[_Entry], messages: list[str],
                     resolve: bool = False) -> list[_Entry]:
    """``entries`` less the second copies of an LMS user (one Canvas or Moodle id found
    twice). A copy whose files another copy holds, byte for byte, is skipped for the one
    holding all of them. Copies that differ otherwise are not graded, unless ``resolve``
    (``--resolve-duplicates``): then the newest Canvas upload, else the unpacked files at the
    top, else the first zip by name. Messages name what was skipped.
    """
    groups: dict[tuple[str, str], list[_Entry]] = {}
    for e in entries:
        if e.kind in ("canvas", "moodle"):
            groups.setdefault((e.kind, e.lms_id), []).append(e)
    same: dict[tuple[str, str, str], list[str]] = {}  # (skipped's download, kept's, how) -> ids
    skipped: set[int] = set()
    for copies in groups.values():
        if len(copies) < 2:
            continue
        files = {id(e): set(_contents(e)) for e in copies}
        every = set().union(*files.values())
        copies.sort(key=lambda e: (files[id(e)] != every, -_upload(e), _rank(e), e.via))
        kept = copies[0]
        for e in copies[1:]:
            skipped.add(id(e))
            if files[id(e)] <= files[id(kept)]:  # nothing of it that the kept copy lacks
                what = "the same files" if files[id(e)] == files[id(kept)] else \
                    "each of their files the same there"
                same.setdefault((e.via, kept.via, what), []).append(kept.base)
                continue
            if not resolve:
                kept.problem = kept.problem or (
                    f"two different submissions of LMS user {kept.lms_id}, in "
                    f"{_where(kept.via)} and in {_where(e.via)}: remove one, or grade the "
                    "newest with --resolve-duplicates")
                continue
            why = ("the newer Canvas upload" if _upload(kept) > _upload(e) else
                   "unpacked files before a zip" if _rank(kept) < _rank(e) == 2 else
                   "the folder's own files first" if _rank(kept) < _rank(e) else
                   "the first by name")
            messages.append(
                f"{kept.base} (LMS id {kept.lms_id}) is in {_where(kept.via)} and in "
                f"{_where(e.via)} with different files: graded those in {_where(kept.via)} "
                f"({why}, --resolve-duplicates), skipped the others")
    for (via, kept_via, what), ids in sorted(same.items()):
        messages.append(f"{_where(via)}: skipped {len(ids)} student(s) already in "
                        f"{_where(kept_via)} (the same LMS ids, {what}): "
                        f"{_listed(sorted(ids))}")
    return [e for e in entries if id(e) not in skipped]


def _unique_ids(entries: list[_Entry]) -> list[str]:
    """One id per entry: its base id, or, where entries share it case-insensitively,
    ``<base>_<hash of the origin's name>`` for each that does not own it (the one LMS user
    whose id it is, else a folder named exactly so). Stable across reruns: depends only on
    the set of entries."""
    groups: dict[str, list[int]] = {}
    for i, e in enumerate(entries):
        groups.setdefault(e.base.casefold(), []).append(i)
    ids = [e.base for e in entries]
    for members in groups.values():
        if len(members) < 2:
            continue
        lms = [i for i in members if entries[i].kind in ("canvas", "moodle")]
        exact = [i for i in members
                 if entries[i].kind == "folder" and entries[i].origin.name == entries[i].base]
        owners = (lms if len(lms) == 1 else []) if lms else exact
        for i in set(members) - set(owners):
            e = entries[i]
            ids[i] = f"{e.base[: MAX_ID_CHARS - 9]}_{_short_hash(e.origin.name)}"
    # last resort (one origin name in two LMS downloads): numbered by place
    seen: dict[str, list[int]] = {}
    for i, sid in enumerate(ids):
        seen.setdefault(sid.casefold(), []).append(i)
    for members in seen.values():
        for k, i in enumerate(sorted(members, key=lambda i: str(entries[i].origin))[1:], 2):
            ids[i] = f"{ids[i][: MAX_ID_CHARS - 3]}_{k}"
    return ids


def _materialize(e: _Entry, sid: str, unpack_dir: Path, problem: str = "") -> Submission:
    sub = Submission(sid, None, e.origin, name=e.name, lms_id=e.lms_id, late_marked=e.late,
                     problem=problem or e.problem)
    if sub.problem:
        return sub
    budget = _submission_budget()  # all of this submission's zips
    if e.kind == "folder":
        sub.path = _folder_with_zips(e.origin, unpack_dir / sid, sub, budget)
    elif e.kind == "zip":
        sub.path = unpack_dir / sid
        sub.links = _safe_unzip(e.origin, sub.path, budget)
    elif e.kind == "moodle" and (folders := [p for p in e.files if p.is_dir()]):
        # graded in place, like a student's folder (an onlinetext folder comes after the
        # file folder in name order and is not used)
        files = [p for p in folders if "_assignsubmission_file" in p.name] or folders
        sub.path = _folder_with_zips(sorted(files)[0], unpack_dir / sid, sub, budget)
    elif e.kind in ("canvas", "moodle"):
        sub.path = unpack_dir / sid
        if sub.path.exists():
            shutil.rmtree(sub.path)
        sub.path.mkdir(parents=True)
        _gather(e, sub, budget)
    return sub


def _folder_with_zips(folder: Path, dest: Path, sub: Submission, budget: Budget) -> Path:
    """``folder`` itself; or, when it holds zips, ``dest`` with its notebooks mirrored and
    each zip's notebooks unpacked into a folder named after it, within ``budget``."""
    found = _walk(folder)
    zips = [(p, st) for p, st in found if p.name.lower().endswith(".zip")]
    if not zips:
        return folder
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for p, _ in found:
        rel = p.relative_to(folder)
        if p.name.lower().endswith(".ipynb"):
            _mirror(p, dest / rel)
    for p, _ in zips:
        rel = p.relative_to(folder)
        into = rel.parent / _free(dest / rel.parent, rel.stem)
        sub.links += [(into / n).as_posix() for n in _safe_unzip(p, dest / into, budget)]
    return dest


def _free(folder: Path, name: str) -> str:
    """The name of the folder a zip is unpacked into in ``folder``: its stem, else
    ``<stem> (zip)``, ``<stem> (zip 2)``, ...: never a name already there.

    >>> import tempfile; d = Path(tempfile.mkdtemp()); (d / "a.ipynb").mkdir()
    >>> _free(d, "a.ipynb"), _free(d, "b")
    ('a.ipynb (zip)', 'b')
    """
    names = itertools.chain([name, f"{name} (zip)"],
                            (f"{name} (zip {k})" for k in itertools.count(2)))
    return next(n for n in names if not os.path.lexists(folder / n))


def _gather(e: _Entry, sub: Submission, budget: Budget) -> None:
    """Put an LMS file group's notebooks and zips (unpacked within ``budget``) into
    ``sub.path`` under the student's names (of Canvas's re-uploads, ``-1``, ``-2``, the
    highest wins); those Canvas marked ``LATE`` go into ``sub.late_files``."""
    best: dict[str, tuple[int, Path]] = {}  # file name -> (re-upload number, source)
    for src in sorted(e.files):
        m = (_CANVAS if e.kind == "canvas" else _MOODLE_FILE).match(src.name)
        fname, n = m["file"], 0
        if e.kind == "canvas" and (r := _RESUBMITTED.match(fname)):
            fname, n = r["stem"] + r["ext"], int(r["n"])
        if fname not in best or n >= best[fname][0]:
            best[fname] = (n, src)
    for fname, (_, src) in sorted(best.items()):
        if fname.lower().endswith(".zip"):
            taken = _free(sub.path, Path(fname).stem)
            sub.links += _safe_unzip(src, sub.path / taken, budget)
        elif fname.lower().endswith(".ipynb") and "/" not in fname:
            taken = fname
            _mirror(src, sub.path / fname)
        else:
            continue
        if e.kind == "canvas" and (m := _CANVAS.match(src.name)):
            sub.canvas_files[taken] = src.name[: m.start("file") - 1]
            if m["late"]:
                sub.late_files.add(taken)


def discard_unpacked(unpack_dir: Path) -> None:
    """Remove intake's unpacked copies once graded (the kept copy is the rebuilt notebook in
    ``OUT_DIR/submitted/``; issue 47 item 7 bounds what a submission leaves)."""
    shutil.rmtree(unpack_dir, ignore_errors=True)


def discover(submissions_dir: Path, unpack_dir: Path,
             resolve: bool = False) -> tuple[list[Submission], list[str]]:
    """One Submission for every entry of ``submissions_dir``, sorted by id (one that cannot
    be read has ``problem``: never raises), and the console's messages (``resolve``:
    :func:`_one_per_student`)."""
    messages: list[str] = []
    unpack_dir.mkdir(parents=True, exist_ok=True)
    entries = _one_per_student(_classify(submissions_dir, unpack_dir / ".lms", messages),
                               messages, resolve)
    subs = []
    for e, sid in zip(entries, _unique_ids(entries)):
        try:
            sub = _materialize(e, sid, unpack_dir)
        except Exception as err:  # noqa: BLE001 - never stop the class for one entry
            sub = _materialize(e, sid, unpack_dir, problem=str(err) if isinstance(
                err, IntakeProblem) else f"cannot read ({type(err).__name__})")
        sub.lms = e.kind if e.kind in ("canvas", "moodle") else ""
        sub.download = _where(e.via) if sub.lms else ""
        if sub.problem:
            sub.path = None
            messages.append(f"{e.origin.name}: {sub.problem}")
        subs.append(sub)
    subs.sort(key=lambda s: s.student)
    return subs, messages
