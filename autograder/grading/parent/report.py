"""The class report, ``OUT_DIR/report.html``: what the class got right and wrong, at a glance.

One self-contained HTML file (plots as inline SVG, no scripts, no external files), rebuilt
from ``OUT_DIR/results/*.json`` as students finish (:class:`ReportWriter`), so a run stopped
midway leaves a report of the students graded so far. Per notebook: score distributions, the
mistakes ranked by how many students made them, the reasons rows were not graded, flagged
rows, reviews pending in formgrader, and late work; for the class: lateness, a table of
totals as the exports compute them (:func:`exports.total`), the slowest students and the
grades the last run changed (``ledger.py``'s change log). Given grades.csv's rows, it shows
what grades.csv and the exports show. Every text from a submission or result is escaped.

Example: ``write_report(Path("grades"))`` writes ``grades/report.html``.
"""

from __future__ import annotations

import html
import os
import time
from collections import defaultdict
from pathlib import Path

from ..status import row_kind
from .diagnosis import kind_of
from .exports import total
from .results import load_results
from .times import MARKED, UNKNOWN, late_summary

SLOWEST = 10  # students listed in "slowest students"

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
h1{margin-bottom:0}table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.n{text-align:right}.muted{color:#777}
svg.plot{max-width:100%;height:auto;border:1px solid #eee}
"""


def _esc(x) -> str:
    return html.escape(str(x), quote=True)


def _num(x) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _fmt(x: float) -> str:
    return f"{x:g}"


def _table(cls: str, heads: list[str], rows: list[str]) -> str:
    """``<table class=cls>``: a header row of ``heads`` (HTML), then ``rows`` (HTML)."""
    ths = "".join(f"<th>{h}</th>" for h in heads)
    return "\n".join([f"<table class={cls}><tr>{ths}</tr>", *rows, "</table>"])


def _who(student: str, name: str) -> str:
    """A student as the report shows them (escaped): id, and the display name if it differs."""
    if name and name != student:
        return f"{_esc(student)} <span class=muted>({_esc(name)})</span>"
    return _esc(student)


_BLUE, _RED, _GREY = "#4477aa", "#cc6677", "#888"
_PANEL_W, _PANEL_H, _COLS = 240, 170, 4  # one exercise's chart, in CSS pixels


def _histograms(title: str, panels: list[tuple[str, list[float], float, int]]) -> str:
    """One inline SVG with a bar chart per panel: (label, scores, max points, not graded): a
    bar per score that occurs (0 and the maximum always) and a red "n/g" bar. Plain SVG text:
    no plotting library to load (matplotlib cost every run about 3 s of CPU)."""
    cols = max(1, min(_COLS, len(panels)))
    rows = (len(panels) + cols - 1) // cols
    width, height = cols * _PANEL_W, rows * _PANEL_H + 28
    out = [f"<svg class='plot' xmlns='http://www.w3.org/2000/svg' width='{width}' "
           f"height='{height}' viewBox='0 0 {width} {height}' role='img' "
           f"aria-label='score distribution of {_esc(title)}' font-family='sans-serif'>",
           f"<text x='{width / 2:g}' y='18' text-anchor='middle' font-size='14'>"
           f"{_esc(title)}</text>"]
    for i, panel in enumerate(panels):
        x0, y0 = (i % cols) * _PANEL_W, 28 + (i // cols) * _PANEL_H
        out.append(_panel(x0, y0, *panel))
    out.append("</svg>")
    return "".join(out)


def _panel(x0: float, y0: float, label: str, scores: list[float], max_points: float,
           not_graded: int) -> str:
    values = sorted(set(scores) | {0.0, max_points})
    bars = [(_fmt(v), sum(1 for s in scores if s == v), _BLUE) for v in values]
    if not_graded:
        bars.append(("n/g", not_graded, _RED))
    top = max(1, max(n for _, n, _ in bars))
    left, right, head, foot = 34, 8, 22, 34  # the axes' box inside the panel
    plot_w, plot_h = _PANEL_W - left - right, _PANEL_H - head - foot
    step = plot_w / len(bars)
    base = y0 + head + plot_h
    parts = [f"<text x='{x0 + left + plot_w / 2:g}' y='{y0 + 14}' text-anchor='middle' "
             f"font-size='11'>{_esc(label)}</text>",
             f"<line x1='{x0 + left}' y1='{base}' x2='{x0 + left + plot_w}' y2='{base}' "
             f"stroke='{_GREY}'/>",
             f"<text x='{x0 + left + plot_w / 2:g}' y='{base + 28}' text-anchor='middle' "
             f"font-size='9' fill='#555'>points</text>",
             f"<text x='{x0 + 10}' y='{y0 + head + plot_h / 2:g}' text-anchor='middle' "
             f"font-size='9' fill='#555' transform='rotate(-90 {x0 + 10} "
             f"{y0 + head + plot_h / 2:g})'>students</text>"]
    for k, (name, n, color) in enumerate(bars):
        h = plot_h * n / top
        x = x0 + left + k * step + step * 0.15
        parts.append(f"<rect class='bar' x='{x:.1f}' y='{base - h:.1f}' width='{step * 0.7:.1f}' "
                     f"height='{h:.1f}' fill='{color}'><title>{_esc(name)}: {n}</title></rect>")
        parts.append(f"<text x='{x + step * 0.35:.1f}' y='{base + 12}' text-anchor='middle' "
                     f"font-size='9'>{_esc(name)}</text>")
        if n:
            parts.append(f"<text x='{x + step * 0.35:.1f}' y='{base - h - 3:.1f}' "
                         f"text-anchor='middle' font-size='9'>{n}</text>")
    return "".join(parts)


def _notebook_section(notebook: str, rows: list[dict], names: dict[str, str]) -> str:
    exercises: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        exercises[str(r.get("exercise", ""))].append(r)
    panels = []
    totals: dict[str, float] = defaultdict(float)
    total_max: dict[str, float] = defaultdict(float)
    incomplete: set[str] = set()
    table = []
    for ex, ex_rows in exercises.items():
        max_points = max((_num(r.get("max_points")) or 0.0) for r in ex_rows)
        scores = []
        not_graded = 0
        for r in ex_rows:
            sid = str(r.get("student", ""))
            total_max[sid] += _num(r.get("max_points")) or 0.0
            p = _num(r.get("points"))
            if not row_kind(r).graded or p is None:
                not_graded += 1
                incomplete.add(sid)
            else:
                scores.append(p)
                totals[sid] += p
        panels.append((ex, scores, max_points, not_graded))
        mean = _fmt(round(sum(scores) / len(scores), 2)) if scores else "–"
        full = sum(1 for s in scores if s >= max_points)
        table.append(
            f"<tr><td>{_esc(ex)}</td><td class=n>{_fmt(max_points)}</td>"
            f"<td class=n>{mean}</td><td class=n>{full}</td><td class=n>{len(scores)}</td>"
            f"<td class=n>{not_graded}</td></tr>"
        )
    penalty = _penalties(rows)
    complete = [max(0.0, totals[s] - penalty.get(s, 0.0)) for s in totals if s not in incomplete]
    notebook_max = max(total_max.values(), default=0.0)
    lost = any(penalty.values())  # a penalty of 0 (a notebook that scored 0) took nothing
    label = "total after late penalty" if lost else "total"
    panels.insert(0, (label, complete, notebook_max, len(incomplete)))
    parts = [
        f"<section class=notebook id='nb-{_esc(notebook)}'><h2>{_esc(notebook)}</h2>",
        _histograms(notebook, panels),
        _table("exercises", ["exercise", "max", "mean (graded)", "full marks", "graded",
                             "not graded"], table),
        _mistakes(rows, names, lost),
        _not_graded(rows, names),
        _flagged(rows, names),
        _reviews(rows, names),
        _late(rows, names, totals, incomplete),
        "</section>",
    ]
    return "\n".join(parts)


def rank_mistakes(rows: list[dict]) -> list[tuple[str, list[str], list[str]]]:
    """[(diagnosis, exercises, students)] of graded rows that lost points, most students first.

    >>> rank_mistakes([
    ...     {"student": "a", "exercise": "e1", "status": "graded", "diagnosis": "mask inverted"},
    ...     {"student": "b", "exercise": "e1", "status": "graded", "diagnosis": "mask inverted"},
    ...     {"student": "b", "exercise": "e2", "status": "graded", "diagnosis": "wrong shape"}])
    [('mask inverted', ['e1'], ['a', 'b']), ('wrong shape', ['e2'], ['b'])]
    """
    students: dict[str, set[str]] = defaultdict(set)
    exercises: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        d = str(r.get("diagnosis", "") or "")
        if not d or not row_kind(r).graded:
            continue
        students[d].add(str(r.get("student", "")))
        exercises[d].add(str(r.get("exercise", "")))
    ranked = sorted(students, key=lambda d: (-len(students[d]), d))
    return [(d, sorted(exercises[d]), sorted(students[d])) for d in ranked]


def _penalties(rows: list[dict]) -> dict[str, float]:
    """{student: late penalty} of one notebook's rows (grades.csv repeats it on each row)."""
    return {str(r.get("student", "")): p for r in rows
            if (p := _num(r.get("late_penalty"))) is not None}


def _mistakes(rows: list[dict], names: dict[str, str], late: bool = False) -> str:
    ranked = rank_mistakes(rows)
    if not ranked:
        also = " Points were lost to the late penalty: see Late work below." if late else ""
        return ("<h3>Mistakes</h3><p class=muted>No graded exercise lost points on its tests."
                f"{also}</p>")
    table = [f"<tr><td class=n>{i}</td><td class=mistake>{_esc(d)}</td>"
             f"<td>{_esc(', '.join(exs))}</td><td class=n>{len(who)}</td>"
             f"<td>{', '.join(_who(s, names.get(s, '')) for s in who)}</td>"
             f"<td class=kind>{kind_of(d)}</td></tr>" for i, (d, exs, who) in enumerate(ranked, 1)]
    return "\n".join([
        "<h3>Mistakes, by how many students made them</h3>",
        "<p class=muted>kind: <b>catalogued mistake</b> = a wrong answer the check library "
        "knows and names for this exercise; <b>symptom</b> = a general symptom the check "
        "library saw in the output (transposed, scaled, sign flipped, off by one, ...); "
        "<b>failure kind</b> = what kind of thing went wrong (not implemented, raised an "
        "exception, wrong shape, output differs, ...).</p>",
        _table("mistakes", ["#", "mistake", "exercises", "students", "who", "kind"], table)])


def _not_graded(rows: list[dict], names: dict[str, str]) -> str:
    reasons: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for r in rows:
        if not row_kind(r).graded:
            reason = str(r.get("status", ""))
            reasons[reason][str(r.get("student", ""))].add(str(r.get("exercise", "")))
    if not reasons:
        return "<h3>Not graded</h3><p class=muted>Every exercise was graded.</p>"
    table = []
    for reason in sorted(reasons, key=lambda k: (-len(reasons[k]), k)):
        who = reasons[reason]
        listed = "; ".join(
            f"{_who(s, names.get(s, ''))} ({_esc(', '.join(sorted(who[s])))})" for s in sorted(who)
        )
        table.append(f"<tr><td>{_esc(reason)}</td><td class=n>{len(who)}</td><td>{listed}</td>"
                     "</tr>")
    return "<h3>Not graded</h3>\n" + _table("not-graded", ["reason", "students",
                                                             "who (exercises)"], table)


def _flagged(rows: list[dict], names: dict[str, str]) -> str:
    """Rows the verdict flagged for a human look (``flagged``: "flagged: <what>"), if any."""
    return _listing(rows, names, "Flagged for review", "flagged", "why",
                    lambda r: str(r.get("flagged", "")).removeprefix("flagged:").strip())


def _reviews(rows: list[dict], names: dict[str, str]) -> str:
    """The reviews still pending (grades.csv's ``review``), if any."""
    return _listing(rows, names, "Reviews pending in formgrader", "review", "review",
                    lambda r: str(r["review"]))


def _listing(rows: list[dict], names: dict[str, str], title: str, column: str, what: str,
             text) -> str:
    """A table of the rows whose ``column`` is set (student, exercise, ``text(row)``) under
    ``title``; '' when there is none."""
    listed = [r for r in rows if str(r.get(column, "") or "")]
    if not listed:
        return ""
    listed.sort(key=lambda r: (str(r.get("student")), str(r.get("exercise"))))
    table = [f"<tr><td>{_who(str(r.get('student', '')), names.get(str(r.get('student', '')), ''))}"
             f"</td><td>{_esc(r.get('exercise', ''))}</td><td>{_esc(text(r))}</td></tr>"
             for r in listed]
    return f"<h3>{title}</h3>\n" + _table(column, ["student", "exercise", what], table)


def _late(rows: list[dict], names: dict[str, str], totals: dict[str, float],
          incomplete: set[str]) -> str:
    """Late work in one notebook: each late student (grades.csv's ``late_by``, not ``submission
    time unknown``), the penalty, and the notebook's total before and after it."""
    late = {str(r.get("student", "")): r for r in rows
            if (by := r.get("late_by") or "") and not by.startswith(UNKNOWN)}
    if not late:
        return ""
    table = []
    for sid in sorted(late):
        r = late[sid]
        p = _num(r.get("late_penalty"))
        before = "–" if sid in incomplete else _fmt(totals.get(sid, 0.0))
        after = "–" if sid in incomplete else _fmt(max(0.0, totals.get(sid, 0.0) - (p or 0.0)))
        table.append(f"<tr><td>{_who(sid, names.get(sid, ''))}</td>"
                     f"<td>{_esc(r.get('late_by', ''))}</td>"
                     f"<td class=n>{'none' if p is None else _fmt(p)}</td>"
                     f"<td class=n>{before}</td><td class=n>{after}</td></tr>")
    return "<h3>Late work</h3>\n" + _table("late", ["student", "late by", "late penalty",
                                                     "total before", "total after"], table)


def _lateness(rows: list[dict]) -> str:
    """One assignment's lateness as the totals table says it (escaped), '' when on time.

    >>> _lateness([{"notebook": "a", "late_by": "1 day, 2:00:00", "late_penalty": "3"}])
    'late by 1 day, 2:00:00, penalty 3'
    """
    by = next((str(r.get("late_by")) for r in rows if r.get("late_by")), "")
    if not by:
        return ""
    if by.startswith(UNKNOWN):
        return "time unknown, no penalty"
    penalty = {r.get("notebook"): p for r in rows if (p := _num(r.get("late_penalty"))) is not None}
    lost = f"penalty {_fmt(sum(penalty.values()))}" if penalty else "no penalty"
    return _esc(f"{'marked late by Canvas' if by == MARKED else f'late by {by}'}, {lost}")


def _totals(rows: list[dict], names: dict[str, str], notebooks: dict[str, list[str]]) -> str:
    """The class's totals: per student, each assignment's total as the LMS exports compute it
    (:func:`exports.total`), the class total and each late assignment's lateness."""
    people: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        people[str(r.get("student", ""))][str(r.get("notebook", ""))].append(r)
    if not people:
        return ""
    table = []
    for sid in sorted(people, key=lambda s: (names.get(s) or s, s)):
        by_nb = people[sid]
        first = next(iter(by_nb.values()))[0]
        cells, scores, late = [], [], []
        for a, nbs in notebooks.items():
            a_rows = [r for nb in nbs for r in by_nb.get(nb, [])]
            score = total(a_rows) if a_rows else None
            cells.append("–" if score is None else score or "not graded")
            scores.append(score)
            if how := _lateness(a_rows):
                late.append(f"{_esc(a)}: {how}")
        handed_in = [s for s in scores if s is not None]
        class_total = ("not graded" if "" in handed_in else
                       _fmt(sum(float(s) for s in handed_in)) if handed_in else "–")
        lms = first.get("sis_id") or first.get("lms_id") or ""
        table.append(f"<tr><td>{_esc(names.get(sid) or first.get('name') or sid)}</td>"
                     f"<td>{_esc(sid)}</td><td>{_esc(lms)}</td>"
                     + "".join(f"<td class=n>{c}</td>" for c in cells)
                     + f"<td class=n>{class_total}</td><td>{'; '.join(late)}</td></tr>")
    return "<h2>Totals</h2>\n" + _table(
        "totals", ["student", "id", "SIS / LMS id", *map(_esc, notebooks), "total", "lateness"],
        table)


def _slowest(results: dict[str, dict], names: dict[str, str]) -> str:
    timed = sorted(
        ((_num(r.get("seconds")) or 0.0, sid) for sid, r in results.items()), reverse=True
    )[:SLOWEST]
    return "<h2>Slowest students</h2>\n" + _table("slowest", ["student", "seconds"], [
        f"<tr><td>{_who(sid, names.get(sid, ''))}</td><td class=n>{s:.1f}</td></tr>"
        for s, sid in timed])


def _changes(lines: list[dict], names: dict[str, str]) -> str:
    """The grades the last run changed: its lines of the change log (``ledger.changes``).

    >>> "1 -&gt; 2" in _changes([{"run": "r1", "when": "t", "student": "s", "assignment": "a",
    ...     "exercise": "e", "cause": "checks changed", "old": "1", "new": "2"}], {})
    True
    """
    if not lines:
        return "<h2>Changes</h2><p class=muted>The change log (changes.csv) is empty.</p>"
    head = (f"<h2>Changes made by the last run</h2><p>Run {_esc(lines[-1]['run'])} "
            f"({_esc(lines[-1]['when'])}) changed {len(lines)} grade(s); every run's are in "
            "changes.csv.</p>")
    return head + "\n" + _table("changes", [
        "student", "assignment", "exercise", "old -&gt; new", "cause"], [
        f"<tr><td>{_who(c['student'], names.get(c['student'], ''))}</td>"
        f"<td>{_esc(c['assignment'])}</td><td>{_esc(c['exercise'])}</td>"
        f"<td>{_esc(c['old'] or 'none')} -&gt; {_esc(c['new'] or 'none')}</td>"
        f"<td>{_esc(c['cause'])}</td></tr>" for c in lines])


def _pending_line(rows: list[dict]) -> str:
    """The class's count of reviews pending (each notebook's section lists them)."""
    n = sum(1 for r in rows if str(r.get("review", "") or ""))
    return (f"<p class=reviews>{n} grade{'' if n == 1 else 's'} wait{'s' if n == 1 else ''} "
            "for your review in formgrader (an autograded score changed under your manual "
            "score): listed under each notebook.</p>") if n else ""


def render(results: dict[str, dict], students: list[str] | None = None,
           rows: list[dict] | None = None,
           notebooks: dict[str, list[str]] | None = None,
           changes: list[dict] | None = None) -> str:
    """The report's HTML for ``results`` ({student: result dict}); ``students``: the class;
    ``rows``: grades.csv's rows, else the results'; ``notebooks``: {assignment: [notebook]}
    (else one each); ``changes``: the last run's lines of the change log (None: no section)."""
    if students is not None:
        results = {s: results[s] for s in students if s in results}
    names = {sid: str(r.get("name", "") or "") for sid, r in results.items()}
    if rows is None:
        rows = [row for sid in sorted(results) for row in results[sid].get("rows", [])]
    rows = [row for row in rows if str(row.get("student", "")) in results]
    by_notebook: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_notebook[str(row.get("notebook", ""))].append(row)
    expected = len(students) if students is not None else len(results)
    head = (
        f"<p>{len(results)} of {expected} students graded so far.</p>"
        if len(results) < expected
        else f"<p>{len(results)} students graded.</p>"
    )
    body = [_notebook_section(nb, by_notebook[nb], names) for nb in sorted(by_notebook)]
    if notebooks is None:
        notebooks = {nb: [nb] for nb in sorted(by_notebook)}
    return "\n".join(
        [
            "<!DOCTYPE html>",
            "<html lang=en><head><meta charset=utf-8><title>Class report</title>",
            f"<style>{_CSS}</style></head><body>",
            "<h1>Class report</h1>",
            head,
            *(f"<p class=lateness>{_esc(line)}.</p>" for line in late_summary(rows)),
            _pending_line(rows),
            *body,
            _totals(rows, names, notebooks),
            _slowest(results, names) if results else "",
            # last: like the timings above it, the run's own (its id and time)
            _changes(changes, names) if changes is not None else "",
            "</body></html>\n",
        ]
    )


def write_report(out: Path, students: list[str] | None = None,
                 rows: list[dict] | None = None,
                 notebooks: dict[str, list[str]] | None = None) -> Path:
    """Rebuild ``out/report.html`` from ``out/results`` (and grades.csv's ``rows``, when
    given; ``notebooks`` as in :func:`render`) atomically; returns its path."""
    from .ledger import last_run

    path = out / "report.html"
    text = render(load_results(out), students, rows, notebooks, last_run(out))
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


class ReportWriter:
    """Rewrites the report as students finish, spending at most ``share`` of the time on it:
    after each write the next waits ``(time it took) / share`` unless forced (the run's end).
    """

    def __init__(self, out: Path, share: float = 0.1):
        self.out, self.share = out, share
        self._cost, self._done = 0.0, -float("inf")

    def write(self, students: list[str] | None = None, force: bool = False,
              rows: list[dict] | None = None,
              notebooks: dict[str, list[str]] | None = None) -> Path | None:
        if not force and time.monotonic() - self._done < self._cost / self.share:
            return None
        t0 = time.monotonic()
        path = write_report(self.out, students, rows, notebooks)
        self._done = time.monotonic()
        self._cost = self._done - t0
        return path
