"""nbgrader preprocessors the grading course adds, and nbgrader's lists with them inserted.

:func:`autograde_preprocessors` and :func:`feedback_preprocessors` take nbgrader's own default
lists (the ``Autograde.autograde_preprocessors`` and ``GenerateFeedback.preprocessors``
traits of the installed nbgrader) and insert the course's preprocessors at their places; the
course folders' ``nbgrader_config.py`` (``course.write_config``) sets them.

- :class:`StderrIsNotFailure` (autograde, right after execution): nbgrader 0.9.6 gives a test
  cell 0 points when it wrote *anything* to stderr (``utils.determine_grade``), so a correct
  answer whose library prints a warning (PyTorch does) would lose its points. Stderr text of
  test cells becomes ordinary output: still shown in the feedback, no longer a failure. Errors
  (exceptions, failed asserts) still are.
- :class:`HideHiddenTests` (feedback): nbgrader 0.9.6's ``generate_feedback`` renders the
  autograded notebook, whose test cells were restored from the source *with* their hidden
  tests. It removes the hidden region from every test cell, and in a cell that had one keeps
  only the error's name and message: an IPython traceback quotes the failing line, which may be
  a hidden test.
- ``feedback_html.SanitizeOutputs`` (feedback, after :class:`HideHiddenTests`): no student
  output that runs in a browser reaches the feedback page (see ``feedback_html.py``).
- :class:`LimitOutputSize` (autograde, after nbgrader's ``LimitOutput``, which counts lines, not
  characters): a cell that prints 60 one-megabyte lines would otherwise put 60 MB into the
  autograded notebook and the feedback. Each output keeps at most ``max_chars`` characters.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
from nbclient.util import run_sync
from nbformat import ValidationError
from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests, Execute, NbGraderPreprocessor

from ..status import STOPPED_MEMORY


class SealedExecute(Execute):
    """nbgrader's ``Execute``, whose test cells' records are sealed (``records.Seal``) and
    whose kernel's messages are capped and cut as they arrive."""

    def preprocess(self, nb, resources=None, km=None):
        meta = (resources or {}).get("nbgrader", {})
        assignment = meta.get("assignment")
        self.seal = None
        if assignment and meta.get("notebook"):
            from .records import Seal, records_dir

            self.seal = Seal(records_dir(Path.cwd(), assignment), meta["notebook"])
        return super().preprocess(nb, resources, km)

    def preprocess_cell(self, cell, resources, index):
        """Run one cell; the records its test cell sends are sealed (``records.py``: the kernel
        runs the cell with its seal, :func:`with_seal`; the notebook keeps the course's
        source), and a run that stops here is written down with the reason nbclient saw."""
        from nbclient.exceptions import CellTimeoutError, DeadKernelError

        seal = getattr(self, "seal", None)
        if seal is None or cell.cell_type != "code" or not cell.source.strip():
            return super().preprocess_cell(cell, resources, index)
        keys = []
        if utils.is_grade(cell):
            from ..exercises import keys_in

            keys = keys_in(cell.source)
        meta = cell.metadata.get("nbgrader", {})
        course = bool(meta.get("locked")) and not meta.get("grade") and not meta.get("solution")
        seal.start_cell(index, meta.get("grade_id"), keys, course=course)
        source = cell.source
        if seal.secret is not None:
            cell.source = with_seal(source, seal.secret)
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self._stopped(seal, index, source, "ended the kernel")
            raise
        except CellTimeoutError:
            # after the cell timeout's interrupt (``_async_handle_timeout``) the cell never
            # ended; else its reply came and its output kept coming past nbclient's wait
            self._stopped(seal, index, source,
                          "ran past the cell timeout and could not be interrupted"
                          if index in seal.evidence["timeouts"] else "flooded its output")
            raise
        except MemoryError:
            # this process's own memory limit (``--memory``: its ``RLIMIT_AS``), reached
            # while it took the cell's messages (a flood sent past the kernel's output cap):
            # what the cell sent is dropped first (it filled the memory)
            cell.outputs = []
            self._stopped(seal, index, source, STOPPED_MEMORY)
            raise
        finally:
            cell.source = source
            seal.end_cell()

    def _stopped(self, seal, index: int, source: str, why: str) -> None:
        """The run stops in cell ``index``: the seal writes it down, and what ran until then is
        kept for its feedback page (``stopped.keep``)."""
        from nbgrader.preprocessors import LimitOutput

        from .stopped import keep

        seal.stopped(index, why)
        keep(self.nb, self.resources, index, source, why,
             cut=(LimitOutput(), LimitOutputSize()))

    def on_cell_executed(self, **kwargs):
        """nbgrader's, then the seal learns how the cell ended (its execute reply): a test cell
        that ends in an error after its record was sent loses the record (``records.py``)."""
        super().on_cell_executed(**kwargs)
        seal = getattr(self, "seal", None)
        content = (kwargs.get("execute_reply") or {}).get("content") or {}
        if seal is not None:
            seal.cell_ended(str(content.get("status", "")), str(content.get("ename", "")))

    def process_message(self, msg, cell, cell_index):
        """nbclient's, except that a record (:data:`record.RECORD_MIME`) goes to the seal, never
        into the notebook, and a rich output is cut to :attr:`LimitOutputSize.max_chars` as it
        arrives (a flood of images costs no memory here)."""
        from ..record import RECORD_MIME

        content = msg.get("content") or {}
        data = content.get("data") if msg.get("msg_type") in (
            "display_data", "execute_result", "update_display_data") else None
        if isinstance(data, dict) and RECORD_MIME in data:
            seal = getattr(self, "seal", None)
            if seal is not None:
                seal.record(data[RECORD_MIME])
            return None
        if isinstance(data, dict):
            _cut_bundle(data, LimitOutputSize.max_chars)
        try:
            return super().process_message(msg, cell, cell_index)
        except ValidationError:  # the student's output, not the grader's failure: dropped
            seal = getattr(self, "seal", None)
            if seal is not None:
                seal.invalid_output()
            return None

    async def async_start_new_kernel_client(self):
        """nbclient's, with a cap on the size of every message the kernel may send here
        (:data:`record.MAX_MESSAGE`, ZeroMQ's ``MAXMSGSIZE``: a larger one disconnects the
        kernel's socket and is never read into this process's memory)."""
        import zmq

        from ..record import MAX_MESSAGE

        make = self.km.client

        def client(**kw):  # each client has a ZeroMQ context of its own: the cap goes there
            kc = make(**kw)
            kc.context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
            return kc

        self.km.client = client
        return await super().async_start_new_kernel_client()

    start_new_kernel_client = run_sync(async_start_new_kernel_client)  # what setup_kernel calls

    async def async_execute_cell(self, cell, cell_index, execution_count=None,
                                 store_history=True):
        """nbclient's, except that a test cell is not stored in the kernel's input history:
        its hidden part (the hidden cases' calls, the given earlier solutions) never reaches
        ``In``, ``_ih`` or a later cell's view of them (issue 47)."""
        return await super().async_execute_cell(
            cell, cell_index, execution_count, store_history and not utils.is_grade(cell))

    execute_cell = run_sync(async_execute_cell)  # what preprocess_cell calls

    async def _async_handle_timeout(self, timeout, cell=None):
        seal = getattr(self, "seal", None)
        if seal is not None and seal.cell is not None:
            seal.timeout(seal.cell)
        return await super()._async_handle_timeout(timeout, cell)


class StderrIsNotFailure(NbGraderPreprocessor):
    """Turn stderr stream outputs of test cells into stdout (only errors cost points)."""

    def preprocess_cell(self, cell, resources, cell_index):
        if utils.is_grade(cell) and cell.cell_type == "code":
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream" and out.get("name") == "stderr":
                    out["name"] = "stdout"
        return cell, resources


class HideHiddenTests(ClearHiddenTests):
    """Remove hidden-test source and hidden-test tracebacks from test cells (feedback only)."""

    def preprocess_cell(self, cell, resources, cell_index):
        if not utils.is_grade(cell):
            return cell, resources  # students' own cells are shown as they wrote them
        try:
            removed = self._remove_hidden_test_region(cell)
        except RuntimeError:  # an unbalanced marker: show nothing of this cell's source
            cell.source = "# (test source not shown)"
            removed = True
        if removed:
            cell.source = cell.source.rstrip("\n") + "\n# (hidden tests not shown)"
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    out["traceback"] = [f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"]
        return cell, resources


class LimitOutputSize(NbGraderPreprocessor):
    """Cut every output of every cell to ``max_chars`` characters (text, data, tracebacks).

    A stream keeps its first ``max_chars`` characters and a note; a rich output (image, HTML)
    larger than that is replaced by the note; an error keeps its name, a cut message and a cut
    traceback, so it still costs the points.

    >>> from nbformat.v4 import new_code_cell, new_output
    >>> cell = new_code_cell(outputs=[new_output("stream", name="stdout", text="x" * 50)])
    >>> out = LimitOutputSize(max_chars=10).preprocess_cell(cell, {}, 0)[0].outputs[0]
    >>> out.text
    'xxxxxxxxxx\\n[course-grade: output cut, 40 more characters not shown]\\n'
    """

    max_chars = 20_000
    # the outputs of the student's cells, all of them together (a test cell's are the course's
    # and each is cut like any output): fifty cells interleaving stdout and stderr made a
    # 100 kB notebook 132 MB in each of its copies (autograded, feedback, return)
    max_notebook_chars = 500_000

    def __init__(self, max_chars: int | None = None, max_notebook_chars: int | None = None,
                 **kw):
        super().__init__(**kw)
        if max_chars is not None:
            self.max_chars = max_chars
        if max_notebook_chars is not None:
            self.max_notebook_chars = max_notebook_chars

    def preprocess(self, nb, resources):
        """Each output cut (:meth:`preprocess_cell`), then the student's cells' outputs kept
        up to :attr:`max_notebook_chars` in all, a note where the rest was dropped.

        >>> from nbformat.v4 import new_code_cell, new_notebook, new_output
        >>> out = lambda: new_output("stream", name="stdout", text="x" * 50)
        >>> nb = new_notebook(cells=[new_code_cell(outputs=[out(), out()]) for _ in range(3)])
        >>> nb, _ = LimitOutputSize(max_notebook_chars=200).preprocess(nb, {})
        >>> [len(c.outputs) for c in nb.cells], nb.cells[1].outputs[-1].text[:38]
        ([2, 1, 1], '[course-grade: 2 more outputs not kept')
        """
        kept = 0
        for index, cell in enumerate(nb.cells):
            cell, resources = self.preprocess_cell(cell, resources, index)
            if cell.get("cell_type") != "code" or utils.is_grade(cell):
                continue
            outputs = cell.get("outputs", [])
            for k, out in enumerate(outputs):
                kept += len(json.dumps(out))
                if kept > self.max_notebook_chars:
                    cell.outputs = outputs[:k] + [nbformat.v4.new_output(
                        "stream", name="stdout",
                        text=f"[course-grade: {len(outputs) - k} more outputs not kept: the "
                             f"notebook's outputs are over {self.max_notebook_chars:,} "
                             "characters]\n")]
                    break
        return nb, resources

    def _cut(self, text: str) -> str:
        return cut_text(text, self.max_chars)

    def preprocess_cell(self, cell, resources, cell_index):
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "stream":
                text = out.get("text", "")
                out["text"] = self._cut("".join(text) if isinstance(text, list) else text)
            elif kind in ("display_data", "execute_result"):
                data = out.get("data", {})
                for mime in list(data):
                    value = data[mime]
                    size = len(value) if isinstance(value, str) else len(str(value))
                    if size > self.max_chars:
                        del data[mime]
                        data["text/plain"] = self._cut(str(value)[: self.max_chars + 1])
            elif kind == "error":
                out["evalue"] = self._cut(str(out.get("evalue", "")))
                tb = out.get("traceback", [])
                cut, total = [], 0
                for line in tb:
                    line = self._cut(line)
                    total += len(line)
                    if total > self.max_chars:
                        cut.append(f"[course-grade: traceback cut, {len(tb) - len(cut)} more "
                                   "lines not shown]")
                        break
                    cut.append(line)
                out["traceback"] = cut
        return cell, resources


def with_seal(source: str, secret: str) -> str:
    """A test cell's source as the kernel runs it: each hidden check's key carries the cell's
    seal after a ``#`` (``_core.hidden_check`` takes it off and hands it to the probe). Only
    the key's text grows: every line keeps its number.

    >>> with_seal('_hidden_check("attention.softmax", softmax)', "ab12")
    '_hidden_check("attention.softmax#ab12", softmax)'
    """
    from ..exercises import HIDDEN_CALL  # (not at the top: exercises imports the checks)

    def sealed(m: re.Match) -> str:
        cut = m.end(1) - m.start()
        return m.group(0)[:cut] + f"#{secret}" + m.group(0)[cut:]

    return HIDDEN_CALL.sub(sealed, source)


def _cut_bundle(data: dict, max_chars: int) -> None:
    """Replace each value of a mime bundle larger than ``max_chars`` by a short note.

    >>> d = {"text/html": "x" * 50, "text/plain": "ok"}; _cut_bundle(d, 10); d["text/plain"]
    'xxxxxxxxxx\\n[course-grade: output cut, 40 more characters not shown]\\n'
    """
    notes = []
    for mime in list(data):
        value = data[mime]
        text = value if isinstance(value, str) else str(value)
        if len(text) > max_chars:
            del data[mime]
            notes.append(cut_text(text, max_chars))
    if notes:
        data["text/plain"] = notes[0]


def cut_text(text: str, max_chars: int) -> str:
    """``text``'s first ``max_chars`` characters and a note of how many more there were."""
    if len(text) <= max_chars:
        return text
    more = len(text) - max_chars
    return f"{text[:max_chars]}\n[course-grade: output cut, {more} more characters not shown]\n"


def _insert(default: list, after: dict[type, type | list[type]]) -> list:
    """``default`` with ``after[cls]`` (one class or a list) placed right after each ``cls``
    it names (all must be there: a renamed nbgrader preprocessor fails loudly instead of being
    skipped)."""
    missing = [c.__name__ for c in after if c not in default]
    if missing:
        raise RuntimeError(f"nbgrader's preprocessor list has no {', '.join(missing)}")
    out = []
    for cls in default:
        out.append(cls)
        extra = after.get(cls, [])
        out += extra if isinstance(extra, list) else [extra]
    return out


def autograde_preprocessors() -> list:
    """nbgrader's autograde list, with ``Execute`` as :class:`SealedExecute`, plus
    ``demo.SkipDemoCells`` before execution (demonstration cells are not run),
    :class:`StderrIsNotFailure` right after execution and :class:`LimitOutputSize` after
    nbgrader's ``LimitOutput``."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import LimitOutput

    from .demo import SkipDemoCells

    default = Autograde.class_traits()["autograde_preprocessors"].default()
    if default[0] is not Execute:
        raise RuntimeError("nbgrader's autograde list no longer starts with Execute")
    listed = _insert(default, {Execute: StderrIsNotFailure, LimitOutput: LimitOutputSize})
    return [SkipDemoCells, *[SealedExecute if c is Execute else c for c in listed]]


def feedback_preprocessors() -> list:
    """nbgrader's feedback list, plus :class:`HideHiddenTests` and ``SanitizeOutputs``
    (``feedback_html.py``: nbconvert's ``SanitizeHTML`` on the outputs) after ``GetGrades``."""
    from nbgrader.converters import GenerateFeedback
    from nbgrader.preprocessors import GetGrades

    from .feedback_html import SanitizeOutputs

    default = GenerateFeedback.class_traits()["preprocessors"].default()
    return _insert(default, {GetGrades: [HideHiddenTests, SanitizeOutputs]})
