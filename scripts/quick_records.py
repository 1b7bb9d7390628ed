"""A quick look, for someone refactoring ``course_lib/checks``: run an assignment's model answer
and every batch of its registered wrong answers in plain local kernels (no nbgrader, no
sandbox) and compare each graded test cell's check records and error message with those saved
in ``tests/data/check_records/<assignment>.json``.

    .venv/bin/python scripts/quick_records.py lesson4 [--jobs 2] [--only solution|wrong-3]

It takes seconds to a minute where ``tests/test_check_records.py`` (the referee, which grades
for real) takes minutes; a refactor that passes here is then checked by that test.  It reads
the notebooks as the grader does: the source's test cells (hidden tests included), each answer
cell the model answer's (solution markers removed) or a wrong answer's.  Prints each difference
and exits 1 if there is any.  A change meant to reword a message (the records unchanged) writes
the new words into the saved file with ``--write-messages``; review that diff.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import wrong_answers  # noqa: E402
from test_check_records import DATA, _cells, _same  # noqa: E402


def _source_answers(source):
    """The source notebook with each answer cell's solution markers removed."""
    nb = wrong_answers.read(source) if isinstance(source, (str, Path)) else source
    for cell in nb.cells:
        if wrong_answers._meta(cell).get("solution"):
            cell.source = wrong_answers.strip_solution_markers(cell.source)
    return nb


def _run(nb, workdir: Path, name: str) -> dict:
    env = {**os.environ, "COURSE_CHECK_RECORDS": "1", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    client = NotebookClient(nb, timeout=300, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(workdir)}})
    client.execute(env=env)
    path = workdir / f"{name}.ipynb"
    nbformat.write(nb, path)
    return json.loads(json.dumps(_cells(path)))  # plain data (nbformat's dicts are a subclass)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("assignment")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default=None, help="'solution' or 'wrong-N'")
    ap.add_argument("--saved", type=Path, default=None, help="the saved records (default: tests/data/...)")
    ap.add_argument("--write-messages", action="store_true",
                    help="if only messages differ, write the new ones into the saved file (review its diff)")
    args = ap.parse_args(argv)
    name = args.assignment
    source = REPO / "solutions" / name / f"{name}.ipynb"
    solution = _source_answers(source)
    wrongs = wrong_answers.load(name) if name != "mini" else []
    batches = wrong_answers.batches(wrongs)
    saved_path = args.saved or DATA / f"{name}.json"
    saved = json.loads(saved_path.read_text())
    jobs = {"solution": solution}
    for i, batch in enumerate(batches, 1):
        jobs[f"wrong-{i}"] = wrong_answers.wrong_submission(solution, batch)
    if args.only:
        jobs = {args.only: jobs[args.only]}
    with tempfile.TemporaryDirectory(prefix=f"quick-{name}-") as tmp:
        def one(item):
            key, nb = item
            d = Path(tmp) / key
            d.mkdir()
            return key, _run(nb, d, name)

        with ThreadPoolExecutor(args.jobs) as pool:
            results = dict(pool.map(one, jobs.items()))
    pairs = []  # (where, cell now, saved cell)
    for key, cells in results.items():
        if key == "solution":
            pairs += [(f"solution[{gid}]", cells.get(gid), saved["solution"][gid])
                      for gid in sorted(saved["solution"])]
            continue
        batch = batches[int(key.split("-")[1]) - 1]
        for gid in sorted({t for w in batch for t in w.loses}):
            k = f"{gid} | {' + '.join(sorted(w.why for w in batch if gid in w.loses))}"
            pairs.append((f"wrong[{k}]", cells.get(gid), saved["wrong"].get(k)))
    records: list[str] = []
    messages: list[str] = []
    for where, now, was in pairs:
        if now is None or was is None:
            records.append(f"{where}: {'not run' if now is None else 'not in the saved file'}")
            continue
        _same(now["records"], was["records"], f"{where}.records", records)
        if now["error"] != was["error"]:
            messages.append(f"{where}.error:\n  now: {now['error']}\n  was: {was['error']}")
    for p in records + messages:
        print(p)
    print(f"{name}: {len(results)} runs; {len(records)} differences in records, {len(messages)} in "
          f"messages, from {saved_path}")
    if args.write_messages and messages and not records:
        for where, now, was in pairs:
            was["error"] = now["error"]
        saved_path.write_text(json.dumps(saved, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
        print(f"wrote the {len(messages)} new messages (records unchanged) to {saved_path}")
        return 0
    return 1 if records or messages else 0

if __name__ == "__main__":
    sys.exit(main())
