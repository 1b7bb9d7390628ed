"""nbgrader preprocessors for grading untrusted notebooks (registered by course_tools.worker).

* :class:`GuardedExecute` replaces nbgrader's ``Execute``: same kernel handling and per-cell
  timeout (``Execute.timeout``, interrupt on timeout), plus

  - a cell that outlives its timeout and ignores the interrupt no longer aborts the
    notebook: the kernel is stopped and the cells after it are marked "not run" (cells
    before keep their results);
  - a kernel that dies (``os._exit``, a crash, killed for memory) costs only its cell and
    what uses it: a new kernel re-runs the code cells that ran to the end before it (test
    cells aside, their outputs dropped) and runs the cells after it, up to
    ``kernel_restarts`` times a notebook; then, or if the new kernel dies while re-running,
    the cells after it are marked "not run";
  - outputs are capped while they arrive (``max_cell_output`` characters per cell,
    ``max_notebook_output`` per notebook), so printing gigabytes fills neither memory, the
    disk, nor the gradebook; errors are always kept (their traceback shortened);
  - after each cell it appends one JSON line of *facts* to ``progress_path``: which cell, its
    status (``ok``, ``timeout``, ``unresponsive``, ``dead``, ``not_run``), the errors it
    raised (type and message), what it wrote to stderr, the check records it published
    (:mod:`course_lib.checks.records`) and whether output was cut.  The grader scores from
    these facts, so a notebook stopped by the per-notebook budget still has a record of the
    cells that finished.

* :class:`SetAsideStderr` turns stderr stream outputs of test cells into display outputs:
  nbgrader's ``determine_grade`` scores a test cell with any stderr 0, so a correct answer
  whose code warns or logs would lose its points.

* :class:`NoPartialCredit` turns ``execute_result`` outputs of test cells into display
  outputs: ``determine_grade`` reads a numeric last value as partial credit, which a learner
  who replaced a check with ``lambda *a: 1`` would otherwise collect.  The course's test cells
  end in a check call or an ``assert`` (tests/test_grading.py checks), so nothing legitimate
  is lost.
"""
from __future__ import annotations

import copy
import json
import os
import signal
import time

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbconvert.preprocessors.execute import NotebookClient
from nbformat.notebooknode import NotebookNode
from traitlets import Integer, Unicode

from nbgrader import utils
from nbgrader.preprocessors import Execute, NbGraderPreprocessor

from course_lib.checks.records import MIME as RECORD_MIME, records_of

_MAX_TRACEBACK_LINES = 60
_MAX_EVALUE = 4000
_MAX_RECORD = 200_000
_MAX_STDERR_FACT = 2000


def role(cell) -> str | None:
    """``"test"`` (graded test cell), ``"answer"`` (solution cell) or ``None``."""
    if utils.is_grade(cell) and not utils.is_solution(cell):
        return "test"
    if utils.is_solution(cell):
        return "answer"
    return None


def _size(content: dict) -> int:
    if "text" in content:
        return len(content.get("text") or "")
    return sum(len(v) if isinstance(v, str) else len(json.dumps(v))
               for v in (content.get("data") or {}).values())


def _error(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue,
                        traceback=[f"{ename}: {evalue}"])


class GuardedExecute(Execute):
    """nbgrader's ``Execute`` for untrusted notebooks (see the module docstring)."""

    max_cell_output = Integer(200_000, help="Characters of output kept per cell (errors and "
                                            "check records aside)").tag(config=True)
    max_notebook_output = Integer(2_000_000, help="Characters of output kept per notebook"
                                  ).tag(config=True)
    max_records = Integer(5_000, help="Check records kept per cell").tag(config=True)
    progress_path = Unicode("", help="File to append one JSON line of facts per cell to"
                            ).tag(config=True)
    kernel_start_attempts = Integer(3, help="Kernel starts to try before giving up"
                                    ).tag(config=True)
    kernel_restarts = Integer(3, help="Times a kernel that died is replaced by a new one "
                              "(the cells that ran before re-run in it) before the rest of "
                              "the notebook is not run").tag(config=True)

    # --- bookkeeping ---------------------------------------------------------------------
    def _note(self, event: dict) -> None:
        if not self.progress_path:
            return
        event.setdefault("at", round(time.time(), 3))
        with open(self.progress_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(event) + "\n")

    def _kernel_pid(self) -> int | None:
        prov = getattr(self.km, "provisioner", None)
        pid = getattr(prov, "pid", None) if prov is not None else None
        return int(pid) if pid else None

    def _stop_kernel(self) -> None:
        """Kill the kernel and everything in its process group (it leads its own session)."""
        pid = self._kernel_pid()
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    # --- execution -----------------------------------------------------------------------
    def preprocess(self, nb, resources=None, km=None):
        # nbconvert's ExecutePreprocessor.preprocess, with each cell guarded
        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        self._stopped = ""
        self._notebook_chars = 0
        self._notebook_id = (resources or {}).get("nbgrader", {}).get("notebook", "")
        self._ran: list[int] = []  # code cells that ran to the end (a restart re-runs them)
        self._restarts, self._died = 0, ""
        start = 0
        while start is not None:  # a new kernel after each one that died
            start = self._run_kernel(start)
        self._note({"event": "kernel_stopped", "notebook": self._notebook_id})
        self.set_widgets_metadata()
        return self.nb, self.resources

    def _run_kernel(self, start: int) -> int | None:
        """Run the cells from ``start`` on in a new kernel, after re-running the cells before
        ``start`` that ran to the end (:meth:`_replay`); returns where to go on in the next
        kernel if this one died, else None."""
        for attempt in range(1, self.kernel_start_attempts + 1):
            self._note({"event": "kernel_starting", "notebook": self._notebook_id,
                        "attempt": attempt})
            running = False
            try:
                with self.setup_kernel():
                    assert self.kc
                    running = True
                    self._note({"event": "kernel", "notebook": self._notebook_id,
                                "pid": self._kernel_pid()})
                    info_msg = self.wait_for_reply(self.kc.kernel_info())
                    assert info_msg
                    self.nb.metadata["language_info"] = info_msg["content"]["language_info"]
                    if start:
                        self._replay(start)
                    for index in range(start, len(self.nb.cells)):
                        if self._guarded_cell(self.nb.cells[index], index):
                            return index + 1
                return None
            except Exception as exc:
                # a kernel that never started is the machine's fault, not the notebook's
                if running or attempt == self.kernel_start_attempts:
                    raise
                self.log.warning("kernel did not start (%s); trying again", exc)
                self._stop_kernel()
                self.km, self.kc = None, None
        return None

    def _replay(self, start: int) -> None:
        """In a kernel started after one died: run again the code cells before ``start`` that
        ran to the end (test cells aside), their outputs and facts dropped, so that the later
        cells find what those defined.  If the kernel dies or a cell hangs again, the rest of
        the notebook is not run (``_stopped``)."""
        self._note({"event": "replay", "notebook": self._notebook_id, "before": start})
        chars = self._notebook_chars
        for index in [i for i in self._ran if i < start]:
            cell = copy.deepcopy(self.nb.cells[index])
            cell.outputs = []
            self._cell_chars, self._cell_records, self._cut = 0, 0, False
            try:
                self.execute_cell(cell, index, store_history=True)
            except (DeadKernelError, CellTimeoutError):
                self._stop_kernel()
                self._stopped = (f"{self._died}, and the new kernel did not get through "
                                 f"re-running cell {self._label(cell, index)}")
                break
        self._notebook_chars = chars

    def _label(self, cell, index: int) -> str:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        return gid or f"#{index + 1}"

    def _guarded_cell(self, cell, index: int) -> bool:
        """Run one cell and note its facts; True if the kernel died and may be restarted."""
        if cell.cell_type != "code":
            return False
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        base = {"event": "end", "notebook": self._notebook_id, "index": index,
                "grade_id": gid, "role": role(cell)}
        if self._stopped:
            cell.outputs = [_error("NotRun", f"not run: {self._stopped}")]
            self._note({**base, "status": "not_run", "errors": [], "stderr": "", "records": [],
                        "cut": False, "seconds": 0.0, "reason": self._stopped})
            return False
        self._note({"event": "start", "notebook": self._notebook_id, "index": index,
                    "grade_id": gid})
        self._cell_chars, self._cell_records, self._cut = 0, 0, False
        status, start, restart = "ok", time.monotonic(), False
        label = self._label(cell, index)
        try:
            self.execute_cell(cell, index, store_history=True)
        except DeadKernelError:
            status = "dead"
            self._died = f"the kernel died in cell {label}"
            restart = self.owns_km and self._restarts < self.kernel_restarts
            self._restarts += restart
            if not restart:
                self._stopped = self._died + (" (after the kernel had been restarted "
                                              f"{self._restarts} times)" if self._restarts
                                              else "")
            cell.outputs.append(_error("DeadKernelError", "the kernel died while running this "
                                       "cell (a crash, os._exit, or too much memory)"))
        except CellTimeoutError:
            status = "unresponsive"
            self._stop_kernel()
            self._stopped = (f"cell {label} ran past its {self.timeout} s timeout and ignored "
                             "the interrupt, so the kernel was stopped")
            cell.outputs.append(_error("CellTimeoutError", f"ran past the {self.timeout} s "
                                       "timeout and ignored the interrupt: the kernel was "
                                       "stopped"))
        else:
            if any(o.get("output_type") == "error" and o.get("ename") == "CellTimeoutError"
                   for o in cell.outputs):
                status = "timeout"
        errors = [{"ename": o.get("ename", ""), "evalue": (o.get("evalue") or "")[:_MAX_EVALUE]}
                  for o in cell.outputs if o.get("output_type") == "error"]
        stderr = "".join(o.get("text", "") for o in cell.outputs
                         if o.get("output_type") == "stream" and o.get("name") == "stderr")
        self._note({**base, "status": status, "errors": errors,
                    "stderr": stderr[:_MAX_STDERR_FACT], "records": records_of(cell.outputs),
                    "cut": self._cut, "seconds": round(time.monotonic() - start, 3),
                    "reason": (self._stopped or self._died) if status in ("dead", "unresponsive")
                    else ""})
        if status == "ok" and role(cell) != "test":
            self._ran.append(index)
        return restart

    # --- output cap ------------------------------------------------------------------------
    def output(self, outs, msg, display_id, cell_index):
        msg_type, content = msg["msg_type"], msg["content"]
        if msg_type == "error":
            content["evalue"] = (content.get("evalue") or "")[:_MAX_EVALUE]
            tb = content.get("traceback") or []
            if len(tb) > _MAX_TRACEBACK_LINES:
                content["traceback"] = tb[:10] + ["... traceback shortened ..."] + tb[-40:]
            content["traceback"] = [line[:_MAX_EVALUE] for line in content["traceback"]]
            return super().output(outs, msg, display_id, cell_index)
        if msg_type == "display_data" and RECORD_MIME in (content.get("data") or {}):
            self._cell_records += 1
            if self._cell_records <= self.max_records and _size(content) <= _MAX_RECORD:
                return super().output(outs, msg, display_id, cell_index)
            self._mark_cut(outs, "check records")
            return None
        size = _size(content)
        room = min(self.max_cell_output - self._cell_chars,
                   self.max_notebook_output - self._notebook_chars)
        if size > room:
            if msg_type == "stream" and room > 0:
                content["text"] = content["text"][:room]
                self._cell_chars += room
                self._notebook_chars += room
                super().output(outs, msg, display_id, cell_index)
            self._mark_cut(outs, "output")
            return None
        self._cell_chars += size
        self._notebook_chars += size
        return super().output(outs, msg, display_id, cell_index)

    def _mark_cut(self, outs, what: str) -> None:
        if not self._cut:
            self._cut = True
            outs.append(NotebookNode(output_type="stream", name="stdout", text=(
                f"\n[... {what} cut by the grader: more than {self.max_cell_output:,} "
                f"characters in this cell or {self.max_notebook_output:,} in the notebook ...]\n")))


class SetAsideStderr(NbGraderPreprocessor):
    """Turn the stderr output of graded test cells into a display output (kept, not scored)."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and role(cell) == "test":
            outputs = []
            for out in cell.outputs:
                if out.get("output_type") == "stream" and out.get("name") == "stderr":
                    out = NotebookNode(output_type="display_data", metadata={},
                                       data={"text/plain": "[stderr, not scored]\n" + out.text})
                outputs.append(out)
            cell.outputs = outputs
        return cell, resources


class NoPartialCredit(NbGraderPreprocessor):
    """Turn ``execute_result`` outputs of graded test cells into display outputs, so nbgrader
    reads no partial credit from a test cell's last value."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and role(cell) == "test":
            for i, out in enumerate(cell.outputs):
                if out.get("output_type") == "execute_result":
                    cell.outputs[i] = NotebookNode(output_type="display_data",
                                                   metadata=out.get("metadata", {}),
                                                   data=out.get("data", {}))
        return cell, resources
