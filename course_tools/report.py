"""What a grading run writes: the master gradebook's scores, ``grades.csv``, ``results.json``,
the Markdown feedback and ``report.txt`` (what the command prints)."""
from __future__ import annotations

import json
import warnings
from dataclasses import asdict
from pathlib import Path

from . import exports, open_gradebook
from .feedback import Report, render_markdown
from .scoring import OVERRULED


def record_scores(db_url: str, report: Report) -> None:
    """Write one student's test-cell scores into the master gradebook (nbgrader's own
    tables: ``nbgrader export`` and formgrader see them)."""
    scores = {(c.notebook, c.grade_id): c.score for c in report.cells}
    with warnings.catch_warnings(), open_gradebook(db_url) as gb:
        # nbgrader's own SQLAlchemy usage warns on every new submission: noise, not news
        warnings.simplefilter("ignore")
        gb.update_or_create_student(report.student)
        sub = gb.update_or_create_submission(report.assignment, report.student)
        for nb in sub.notebooks:
            for g in nb.grades:
                g.auto_score = scores.get((nb.name, g.name), 0.0)
                g.needs_manual_grade = False
        gb.db.commit()


def _fmt(x: float) -> str:
    return f"{x:g}"


def write_outputs(out: Path, reports: list[Report]) -> None:
    exports.write_grades_csv(out / "grades.csv", reports)
    (out / "results.json").write_text(json.dumps([asdict(r) for r in reports], indent=1) + "\n")
    for r in reports:
        path = out / "feedback" / r.student / f"{r.assignment}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_markdown(r))


def print_report(grading, out: Path, ignored: list[str], echo) -> None:
    lines: list[str] = []
    width = max([len(r.student) for r in grading] + [7])
    for r in grading:
        line = (f"  {r.student:<{width}}  {r.assignment:<10} {_fmt(r.score):>5} / "
                f"{_fmt(r.max_score):<5} {r.status}")
        lines.append(line + (f": {r.detail}" if r.detail else ""))
    counts: dict[str, int] = {}
    for r in grading:
        counts[r.status] = counts.get(r.status, 0) + 1
    ran = [r for r in grading if r.seconds]
    lines += ["", f"{len({r.student for r in grading})} student(s), {len(grading)} row(s): "
              + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))]
    overruled = sorted(f"{r.student}/{r.assignment}" for r in grading
                       if any(OVERRULED in n for n in r.notes))
    if overruled:  # worth a look: checks changed or disabled in the notebook
        lines.append(f"test cells that passed in the notebook but not the grader's comparison: "
                     f"{', '.join(overruled)}")
    per_min = 60 * len(grading) / grading.seconds if grading.seconds else 0.0
    lines.append(grading.sandbox)
    if grading.interrupted:
        lines.append("INCOMPLETE: grading was interrupted (Ctrl-C); rows marked interrupted "
                     "were not graded: run the command again to grade them")
    lines.append(f"throughput: {len(grading)} submissions in {grading.seconds:.1f} s "
                 f"{grading.where or f'with {grading.jobs} job(s)'} = {per_min:.1f} submissions/minute (the whole run; "
                 f"{len(ran)} autograded, plus the model answer, in "
                 f"{sum(r.seconds for r in ran):.0f} s of job time)")
    if ignored:
        lines.append(f"ignored (not a student folder or not an assignment): {', '.join(ignored)}")
    lines += [f"note: {n}" for n in grading.notes]
    if grading.problems:
        lines += [f"WARNING: {p}" for p in grading.problems]
    else:
        lines.append("verified: the submissions, the graded assignments' source, course_lib "
                     "and the gradebook's assignment definition are unchanged")
    lines.append(f"grades: {out / 'grades.csv'}  feedback: {out / 'feedback'}/  "
                 f"logs: {out / 'logs'}/  gradebook: {out / 'course' / 'gradebook.db'}")
    (out / "report.txt").write_text("\n".join(lines) + "\n")
    echo("")
    for line in lines:
        echo(line)


