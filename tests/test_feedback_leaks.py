"""Feedback on a hidden test's input names no hidden value.

A learner reads the message of every check that failed (course_tools/feedback.py), and the
label of a check the grader found wrong outside the kernel ("check '...' did not get the
reference result").  On an input only a hidden test passes, both must say which check it was
and what kind of input ("attention on a hidden test's input (batched, with a causal mask)"),
never the input's values (course_lib.checks.on_hidden).  For every assignment:

1. **The secrets** (:func:`secret_literals`): the literal values the hidden-test blocks of the
   source notebook pass: strings (card names, kinds of input), numbers with two or more digits,
   tuples of whole numbers (shapes).  Dict keys (a config's field names) are not values.  A
   value is no secret if the student release shows it (in any usual spelling), or the inputs
   of the visible tests do: the defaults of the checks a visible call makes, and the labels its
   checks record.  One-digit numbers are too common to tell anything.
2. **The labels**: the source notebook's code runs once outside nbgrader (answer cells with
   the model answers, markers stripped, and the prose's cells they need); each test cell's
   visible part and hidden block then run on their own with records on.  No label the hidden
   blocks record may show a secret.
3. **The wrong answers**: for every entry of tests/wrong_answers/<assignment>.py, its code
   replaces the answer (the later answer cells that read what it defines run again), and the
   visible part and the hidden block of each test cell it ``loses`` run on their own, so a
   mistake that already fails the visible case is tried on the hidden inputs too.  No
   :class:`~course_lib.checks.CheckFailed` message may show a secret (:func:`leaked`; a shape
   of the visible part counts only whole, since it may hold a short hidden tuple by chance).

4. **Hostile answers** (:func:`exfiltrators`): for every answer cell that defines functions, functions of the
   same names that try to carry their arguments into the feedback (as text, inside a tuple, as the name of an
   exception class, as a number plus a fraction).  No message of a hidden block may show a secret; an error
   other than a check's counts too, as ``Type: message``, since the feedback shows it.

Lesson 1 has its own test of the rule (tests/test_checks_lesson1.py) and is covered here too.
"""
from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import symtable
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from course_lib.checks.exercise import Exercise

import course_tools
import wrong_answers
from conftest import torch_on_one_thread
from course_tools.feedback import HIDDEN_BEGIN, HIDDEN_END, marked_blocks

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENTS = course_tools.assignments(REPO)


def _source(a: str):
    return nbformat.read(REPO / "solutions" / a / f"{a}.ipynb", as_version=4)


def _release(a: str):
    return nbformat.read(REPO / "notebooks" / a / f"{a}.ipynb", as_version=4)


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


# --- the secrets ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Secret:
    """A literal a hidden test passes: ``value`` as Python reads it, ``text`` as written."""
    value: object
    text: str

    def spellings(self) -> set[str]:
        """How a message or a notebook may write it."""
        v = self.value
        if isinstance(v, str):
            return {v}
        if isinstance(v, tuple):
            return {"(" + ", ".join(map(str, v)) + ")"}
        forms = {self.text, repr(v)}
        if isinstance(v, float):
            forms.add(f"{v:g}")
            if v.is_integer():
                v = int(v)
        if isinstance(v, int):
            forms |= {str(v), f"{v:,}", f"{v:_}"}
        return {f for f in forms if f}


def _number_pattern(form: str) -> str:
    # not part of a longer number or name; "16-bit numbers" names a kind of input, not a value
    return rf"(?<![\w.]){re.escape(form)}(?![\w]|\.\d|-bit)"


def _contains(text: str, secret: Secret, within: bool = True) -> bool:
    """Does ``text`` show ``secret``?  A string case-insensitively, as a whole word; a tuple as
    a whole, or (``within``) as part of a longer tuple (a hidden batch in a hidden shape)."""
    if isinstance(secret.value, str):
        return re.search(rf"(?<![\w.-]){re.escape(secret.value)}(?![\w-])", text,
                         re.IGNORECASE) is not None
    if isinstance(secret.value, tuple):  # a shape, or a part of a longer one: (3, 2) in (3, 2, 7)
        want = list(secret.value)
        for group in re.findall(r"\(([\d,\s]+)\)", text):
            dims = [int(x) for x in re.findall(r"\d+", group)]
            if dims == want or within and any(dims[i:i + len(want)] == want
                                              for i in range(len(dims) - len(want) + 1)):
                return True
        return False
    return any(re.search(_number_pattern(f), text) for f in secret.spellings())


def _literals(code: str):
    """The constants a block of code passes as values (not dict keys), and its int tuples."""
    tree = ast.parse(code)
    keys = {id(k) for node in ast.walk(tree) if isinstance(node, ast.Dict) for k in node.keys
            if k is not None}
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple) and len(node.elts) >= 2 and all(
                isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts):
            yield Secret(tuple(e.value for e in node.elts), ast.get_source_segment(code, node))
        elif isinstance(node, ast.Constant) and id(node) not in keys \
                and not isinstance(node.value, bool):
            v = node.value
            if isinstance(v, str) and len(v.strip()) >= 2:
                yield Secret(v, v)
            elif isinstance(v, (int, float)) and len(re.sub(r"\D", "", repr(v))) >= 2:
                yield Secret(v, ast.get_source_segment(code, node) or repr(v))


def secret_literals(source, release, visible_labels: str = "") -> list[Secret]:
    """The literals of the source notebook's hidden-test blocks that neither the release nor
    the visible tests' inputs show: the checks' defaults (what a visible call passes) and the
    labels its checks record (``visible_labels``, :attr:`Notebook.labels`; they name the inputs
    a check makes from its defaults, such as lesson 2's score table)."""
    shown = "\n".join([*(c.source for c in release.cells), _visible_defaults(source),
                       visible_labels])
    found: dict = {}
    for cell in source.cells:
        block = "\n".join(marked_blocks(cell.source, HIDDEN_BEGIN, HIDDEN_END))
        if block.strip():
            for s in _literals(block):
                found.setdefault((type(s.value), s.value), s)
    return [s for s in found.values() if not _contains(shown, s)]




_NOT_INPUTS = (
    r"model_type \w+",           # a card's family: a kind of input (on_hidden's words)
    r"a factor of about [\d,.]+",  # the size words (checks.size_words): got / expected
    r"by about \d+%",
    r"a factor between [\d,]+ and [\d,]+|less than a factor of 100",  # a sealed answer's
    r"by up to \S+",             # how far the answer is from the reference
)
"""Phrases of a message that carry no input value, left out of the scan."""


def leaked(message: str, secrets: list[Secret], hidden: bool = True) -> list[str]:
    """The secrets ``message`` shows, as written in the hidden test.  A message of the
    visible part (``hidden=False``) names the visible inputs' shapes, which may hold a hidden
    tuple by chance, so there a tuple counts only whole."""
    for phrase in _NOT_INPUTS:
        message = re.sub(phrase, " ", message)
    return [s.text for s in secrets if _contains(message, s, within=hidden)]


def _visible_defaults(source) -> str:
    """The default arguments (as repr) of every check the visible tests call: the inputs the
    visible test passes, which a message may name in full."""
    import importlib
    import inspect
    out = []
    for cell in source.cells:
        if not (_meta(cell).get("grade") and not _meta(cell).get("solution")):
            continue
        visible = cell.source.split("### " + HIDDEN_BEGIN)[0]
        for node in ast.walk(ast.parse(visible)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)):
                continue
            try:
                module = importlib.import_module(f"course_lib.checks.{node.func.value.id}")
            except ImportError:
                continue
            fn = getattr(module, node.func.attr, None)
            if not callable(fn):
                continue
            declared = inspect.unwrap(fn)  # the tutor wraps every check for the notebook
            if isinstance(declared, Exercise):  # a declared exercise: its visible inputs
                out.append(repr(declared.inputs.visible))
                continue
            given = {k.arg for k in node.keywords}
            for i, (name, p) in enumerate(inspect.signature(fn).parameters.items()):
                if p.default is not p.empty and name not in given and i >= len(node.args):
                    out.append(repr(p.default))
    return "\n".join(out)


# --- the notebook, outside nbgrader -------------------------------------------------------------

def _code(source: str) -> str:
    """A cell's code as a plain Python block (solution markers and IPython magics dropped)."""
    return "\n".join(ln for ln in wrong_answers.strip_solution_markers(source).splitlines()
                     if not ln.lstrip().startswith(("%", "!")))


def _names(code: str) -> tuple[set, set]:
    """(names a block defines at top level, names it reads)."""
    tree = ast.parse(code)
    defined = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)  # its body's names are its own
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                             ast.GeneratorExp)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.alias):
            defined.add((node.asname or node.name).split(".")[0])
        todo.extend(ast.iter_child_nodes(node))
    return defined, _globals_read(symtable.symtable(code, "cell", "exec"))


def _globals_read(table) -> set:
    """Names a block reads from the notebook's namespace (not a function's own locals)."""
    top = table.get_type() == "module"
    read = {s.get_name() for s in table.get_symbols()
            if s.is_referenced() and (top or s.is_global())}
    for child in table.get_children():
        read |= _globals_read(child)
    return read


def _recorded(code: str, ns: dict, name: str) -> list[str]:
    """Run ``code`` (a test cell's part, which must pass) with records on; the ``what`` of
    each record its checks publish."""
    import json

    from course_lib.checks import records
    before = os.environ.get(records.ENV)
    os.environ[records.ENV] = "1"
    out = io.StringIO()
    try:
        with _quiet(), contextlib.redirect_stdout(out):
            exec(compile(code, name, "exec"), dict(ns))  # noqa: S102
    finally:
        if before is None:
            del os.environ[records.ENV]
        else:
            os.environ[records.ENV] = before
    return [json.loads(ln.split(" ", 1)[1])["what"] for ln in out.getvalue().splitlines()
            if ln.startswith("COURSE-CHECK-RECORD ")]


@contextlib.contextmanager
def _quiet():
    """No output from the notebook's prints and plots; torch on one thread (these toy models
    run fastest so on a shared 2-core machine)."""
    try:
        with torch_on_one_thread(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        import matplotlib.pyplot as plt
        plt.close("all")


class Notebook:
    """A source notebook's code cells, run in order in one namespace (the model answers), and
    the messages its test cells raise with a wrong answer in place of one answer."""

    def __init__(self, assignment: str):
        os.environ.setdefault("MPLBACKEND", "Agg")
        nb = _source(assignment)
        self.cells = []  # (grade_id or "", kind: "answer", "test" or "code", code)
        for cell in nb.cells:
            if cell.cell_type == "code":
                m = _meta(cell)
                kind = "answer" if m.get("solution") else "test" if m.get("grade") else "code"
                self.cells.append((m.get("grade_id", ""), kind, _code(cell.source)))
        self.tests = {gid: code for gid, kind, code in self.cells if kind == "test"}
        # The prose's own code cells (figures, timings, a model trained to make a point) run
        # only if an answer or test cell reads what they define: they cost seconds.
        needed, run = set(), []
        for gid, kind, code in reversed(self.cells):
            defined, read = _names(code)
            if kind == "test" or kind == "answer" or defined & needed:
                needed |= read
                if kind != "test":
                    run.append((gid, code))
        self.ns: dict = {"__name__": "__main__"}
        with _quiet():
            for gid, code in reversed(run):
                exec(compile(code, gid or "cell", "exec"), self.ns)  # noqa: S102 (our notebook)
        self.labels = {"visible": [], "hidden": []}
        """``{part: [(test cell, what)]}``: the labels of the records the model answers'
        checks publish (each part of each test cell run on its own, as the grader records
        them; a label reaches the learner in the grader's "check ... did not get the
        reference result")."""
        for gid in self.tests:
            for part, code in self.parts(gid):
                self.labels[part] += [(gid, w) for w in _recorded(code, self.ns, gid)]

    def messages(self, wrong, tolerant: bool = False) -> list[tuple[str, str]]:
        """``[(test cell, part, message)]``: the messages (a CheckFailed's, or ``"Type: message"`` of another
        error, as the feedback shows it: course_tools.scoring.describe_errors) of the test cells
        ``wrong`` loses, their visible part and their hidden block each run on its own
        (``part`` is ``"visible"`` or ``"hidden"``), after the answer cell is replaced by
        ``wrong``'s code and the later answer cells that read what it defines have run again
        (test-yourself answers computed with an earlier function, ...; ``tolerant``: one that raises is left as
        it was, as the grader goes on past an answer cell that raised)."""
        ns = dict(self.ns)
        out = []
        with _quiet():
            changed: set = set()
            for gid, kind, code in self.cells:
                if gid == wrong.cell:
                    exec(compile(wrong.source, gid, "exec"), ns)  # noqa: S102
                    changed = _names(wrong.source)[0]
                elif changed and kind == "answer":
                    defined, read = _names(code)
                    if read & changed:
                        with contextlib.suppress(Exception) if tolerant else contextlib.nullcontext():
                            exec(compile(code, gid, "exec"), ns)  # noqa: S102
                        changed |= defined
            assert changed, f"{wrong.cell} defines nothing"
            for gid in wrong.loses:
                for part, code in self.parts(gid):
                    try:
                        exec(compile(code, gid, "exec"), dict(ns))  # noqa: S102
                    except AssertionError as e:  # CheckFailed is one
                        out.append((gid, part, str(e)))
                    except Exception as e:  # noqa: BLE001 - the learner's own error: the feedback shows it too
                        out.append((gid, part, f"{type(e).__name__}: {e}"))
        return out

    def parts(self, gid: str) -> list[tuple[str, str]]:
        """``[("visible", code), ("hidden", code)]`` of a test cell (no hidden part if it has
        no hidden block)."""
        code = self.tests[gid]
        visible = code.split("### " + HIDDEN_BEGIN)[0]
        hidden = "\n".join(marked_blocks(code, HIDDEN_BEGIN, HIDDEN_END))
        return [("visible", visible)] + ([("hidden", hidden)] if hidden.strip() else [])


# --- the tests ----------------------------------------------------------------------------------

def _with_hidden_tests(a: str) -> bool:
    return any(marked_blocks(c.source, HIDDEN_BEGIN, HIDDEN_END) for c in _source(a).cells)


_EXFILTRATE = {  # a hostile learner's function that tries to carry its (hidden) arguments into the feedback
    "returns them as text": "return _leak(args, kwargs)",
    "returns them inside a tuple": "return (_leak(args, kwargs),)",
    "raises a class named after them": "raise type(_leak(args, kwargs), (Exception,), {})()",
    "returns one plus a fraction": "return next(a for a in (*args, *kwargs.values()) if isinstance(a, int)) + 0.5",
}
_LEAK = ("def _leak(args, kwargs):  # the arguments, a tensor's or an array's as its shape\n"
         "    return repr(([tuple(a.shape) if hasattr(a, 'shape') else a for a in args], kwargs))\n")


def exfiltrators(nb: "Notebook") -> list:
    """For every answer cell that defines functions, and each way of :data:`_EXFILTRATE`, a hostile answer: its
    functions, whatever their arguments, try to show them in a check's message; it loses every test cell that
    calls one of them."""
    out = []
    for gid, kind, code in nb.cells:
        functions = sorted(n.name for n in ast.parse(code).body if isinstance(n, ast.FunctionDef)) \
            if kind == "answer" else []
        calls = tuple(t for t, test in nb.tests.items() if any(re.search(rf"\b{f}\b", test) for f in functions))
        for why, body in _EXFILTRATE.items() if functions and calls else ():
            source = _LEAK + "".join(f"def {f}(*args, **kwargs):\n    {body}\n" for f in functions)
            out.append(wrong_answers.Wrong(gid, source, calls, f"{', '.join(functions)} {why}"))
    return out


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_feedback_on_hidden_inputs_names_no_hidden_value(assignment):
    """Every wrong answer's messages, and every label the checks record on the hidden inputs,
    show none of the hidden tests' secrets.  One test per assignment, so that its notebook
    runs once (several seconds for the lessons that train models)."""
    nb = Notebook(assignment)
    secrets = secret_literals(_source(assignment), _release(assignment),
                              "\n".join(what for _, what in nb.labels["visible"]))
    if _with_hidden_tests(assignment):
        assert secrets and nb.labels["hidden"], "the scan has nothing to look for"
    found = [f"{gid}: the record label {what!r} shows {shown}"
             for gid, what in nb.labels["hidden"] if (shown := leaked(what, secrets))]
    registry = wrong_answers.load(assignment)
    assert registry, f"tests/wrong_answers/{assignment}.py lists no wrong answer"
    hidden_messages, hostile = 0, exfiltrators(nb)
    for wrong in [*registry, *hostile]:
        messages = nb.messages(wrong, tolerant=wrong in hostile)
        assert messages or wrong in hostile, f"{wrong.why!r}: none of {wrong.loses} raised a check's message"
        for gid, part, message in messages:
            hidden_messages += part == "hidden"
            if wrong in hostile and part == "visible":
                continue  # a hostile answer shows the visible inputs, which the learner has
            if shown := leaked(message, secrets, hidden=part == "hidden"):
                found.append(f"{wrong.why!r}, {gid} ({part} part): {message!r} shows {shown}")
    if _with_hidden_tests(assignment):
        assert hidden_messages, "no wrong answer fails a hidden test: the hidden inputs go unscanned"
    assert not found, "feedback names hidden values:\n" + "\n".join(found)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_scan_finds_planted_secrets(assignment):
    """The scan is not blind: each secret, in each of its spellings (a tuple also inside a
    longer shape), is found in a message; the phrases that carry no input are not."""
    secrets = secret_literals(_source(assignment), _release(assignment))
    for s in secrets:
        for form in s.spellings():
            assert leaked(f"check(x={form}) is not right", secrets), (s, form)
        if isinstance(s.value, tuple):
            inside = "(7, " + ", ".join(map(str, s.value)) + ", 9)"
            assert leaked(f"q {inside} is not right", [s])
            assert not leaked(f"q {inside} is not right", [s], hidden=False)
    number = Secret(33, "33")
    for message in ("it is too large by a factor of about 33",
                    "it differs from the reference by up to 33", "a 33-bit number",
                    "a card of model_type 33", "1330 tokens", "0.33 of it"):
        assert not leaked(message, [number]), message
    assert leaked("causal_mask(33) is not right", [number])
    assert leaked("a Qwen2-7B-Instruct card", [Secret("qwen2-7b-instruct", "'qwen2-7b-instruct'")])


def test_hidden_labels_name_kinds_not_values():
    import torch

    from course_lib.checks import is_shown, on_hidden, withheld
    assert on_hidden("attention", "batched", "", "with a causal mask") == \
        "attention on a hidden test's input (batched, with a causal mask)"
    assert on_hidden("crossover_length") == "crossover_length on a hidden test's input"
    assert is_shown(dict(n=5, batch=(2,)), [dict(n=4), dict(n=5, batch=(2,))])
    assert not is_shown(dict(n=5), [dict(n=4)])
    assert not is_shown((torch.ones(2), 0.5), [(torch.ones(2), 0.5)])  # not comparable: hidden
    assert withheld("The size of tensor a (17) must match the size of tensor b (9,024) at "
                    "dimension 3, 1e-05") == ("The size of tensor a (…) must match the size of "
                                              "tensor b (…) at dimension …, …")


def test_a_declared_exercise_shows_its_visible_inputs():
    """A check declared as an ``Exercise`` reaches the notebook wrapped by the tutor; its
    visible inputs are still what the visible test shows (lesson 1's block_parts tries
    d_model 1312, lesson 5's kv_cache_size 8192 tokens)."""
    assert "1312" in _visible_defaults(_source("lesson1"))
    assert "8192" in _visible_defaults(_source("lesson5"))
