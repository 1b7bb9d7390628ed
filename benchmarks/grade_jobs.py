"""Grading throughput: ``course_tools.grade`` sandboxed against ``--sandbox none``, and
``--jobs 1`` against ``--jobs 2``.

    .venv/bin/python benchmarks/grade_jobs.py [--students 32] [--assignment lesson1]
        [--jobs 2] [--sandbox bwrap none] [--cluster N]

``--cluster N`` adds a run on a Dask cluster of N one-thread workers started on 127.0.0.1
(course_tools.cluster.LoopbackCluster; its start is not timed), sandboxed, and prints the
scheduling overhead per job (a trivial task's round trip through the scheduler, in ms).

Method: a class of N students is written from the assignment's own notebooks (the model
answer, the blank release, each pack of plausible wrong answers of
tests/wrong_answers/<assignment>.py, a partly wrong one and a noisy one that prints and warns,
repeated under new names up to N); no submission in it times out, so every run must give the
same grades.  The class is graded once per (``--sandbox``, ``--jobs``) pair, in that order, each run from
scratch in a fresh output folder (generate_assignment, the model answer's reference run,
every student), timed by wall clock around the whole ``grade()`` call.  The scores and
statuses must be identical across runs (the script fails otherwise; the detail column
differs by design: ``--sandbox none`` says so in every row).  The table gives students,
seconds, submissions per minute and the throughput relative to the first run (with the
defaults: the sandboxed run's throughput as a fraction of the unsandboxed one's is the last
row's reciprocal).  On a shared machine the seconds are noisy:
quote one run's ratio, not a best of several.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import nbformat  # noqa: E402

import grading_class  # noqa: E402
import wrong_answers  # noqa: E402
from course_tools.grade import grade  # noqa: E402
from course_tools.release import generate_release  # noqa: E402


def build_class(assignment: str, n: int, root: Path) -> Path:
    """Write N submissions under ``root/subs`` (see the module docstring); returns it."""
    generate_release(REPO, [assignment], root / "release")
    release = nbformat.read(root / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    source = nbformat.read(REPO / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    wrongs = wrong_answers.load(assignment)
    solution = wrong_answers.solution_submission(release, source)
    kinds = {k.student: nb for k, nb in grading_class.build(release, source, wrongs)}
    base = [("solution", solution), ("blank", release),
            *((f"wrong-{i}", wrong_answers.wrong_submission(solution, b))
              for i, b in enumerate(wrong_answers.batches(wrongs), 1)),
            ("partly-wrong", kinds["partly-wrong"]), ("noisy", kinds["noisy"])]
    subs = root / "subs"
    for i in range(n):
        name, nb = base[i % len(base)]
        student = f"s{i + 1:03d}-{name}"
        path = subs / student / assignment / f"{assignment}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    return subs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=32)  # the fixed cost shrinks next to a class
    parser.add_argument("--assignment", default="lesson1")
    parser.add_argument("--jobs", type=int, nargs="+", default=[2])
    parser.add_argument("--sandbox", nargs="+", default=["bwrap", "none"],
                        choices=["bwrap", "none"])
    parser.add_argument("--cluster", type=int, default=0, metavar="N",
                        help="also grade on a loopback Dask cluster of N workers")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="grade-jobs-") as tmp:
        root = Path(tmp)
        subs = build_class(args.assignment, args.students, root)
        rows = []
        for box in args.sandbox:
            for jobs in args.jobs:
                out = root / f"out-{box}-jobs{jobs}"
                start = time.monotonic()
                grade(subs, out, [args.assignment], REPO, echo=lambda *a: None, jobs=jobs,
                      sandbox=box)
                seconds = time.monotonic() - start
                with open(out / "grades.csv", newline="") as f:
                    grades = [(r["student"], r["score"], r["status"]) for r in csv.DictReader(f)]
                rows.append((box, jobs, seconds, grades))
        overhead = None
        if args.cluster:
            from course_tools.cluster import LoopbackCluster, scheduling_overhead_ms

            (root / "dask").mkdir()
            with LoopbackCluster(root / "dask") as cluster:
                for _ in range(args.cluster):
                    cluster.start_worker()
                cluster.wait_for_workers(args.cluster)
                with cluster.client() as c:
                    overhead = scheduling_overhead_ms(c)
                out = root / "out-dask"
                start = time.monotonic()
                grade(subs, out, [args.assignment], REPO, echo=lambda *a: None,
                      scheduler=cluster.address)
                seconds = time.monotonic() - start
            with open(out / "grades.csv", newline="") as f:
                grades = [(r["student"], r["score"], r["status"]) for r in csv.DictReader(f)]
            rows.append((f"bwrap, dask {args.cluster} workers", args.cluster, seconds, grades))
        same = all(r[3] == rows[0][3] for r in rows)
        print(f"{args.students} students of {args.assignment}, {os.cpu_count()} CPUs; "
              f"scores and statuses identical across runs: {'yes' if same else 'NO'}")
        print()
        print("| sandbox | jobs | students | seconds | submissions/minute | throughput vs first row |")
        print("|---|---:|---:|---:|---:|---:|")
        for box, jobs, seconds, _ in rows:
            print(f"| {box} | {jobs} | {args.students} | {seconds:.1f} | "
                  f"{60 * args.students / seconds:.1f} | {rows[0][2] / seconds:.2f}x |")
        if overhead is not None:
            local = [r for r in rows if r[0] == "bwrap" and r[1] == args.cluster]
            if local:
                print(f"\ndask ({args.cluster} workers) throughput = "
                      f"{local[0][2] / rows[-1][2]:.1%} of --jobs {args.cluster}'s; "
                      f"scheduling overhead {overhead:.1f} ms per job")
            else:
                print(f"\nscheduling overhead {overhead:.1f} ms per job")
        if [r[0] for r in rows[:2]] == ["bwrap", "none"] and rows[0][1] == rows[1][1]:
            print(f"\nsandboxed throughput = {rows[1][2] / rows[0][2]:.1%} of --sandbox none's "
                  f"(jobs {rows[0][1]}, one run each)")
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
