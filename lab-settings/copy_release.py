"""Copy the release into the learner's work folder, never overwriting: python copy_release.py SRC DST

Files already in DST (the learner's work) are left alone; a new notebook is written with the
``language_info.version`` of the Python running this (the course's kernel), so that JupyterLab,
which writes its kernel's ``language_info`` into a notebook it opens, opens it as saved.
"""
import json
import platform
import shutil
import sys
from pathlib import Path


def main(src: str, dst: str) -> int:
    src_dir, dst_dir = Path(src), Path(dst)
    for path in sorted(src_dir.rglob("*")):
        target = dst_dir / path.relative_to(src_dir)
        if not path.is_file() or target.exists() or ".ipynb_checkpoints" in path.parts:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".ipynb":
            nb = json.loads(path.read_text(encoding="utf-8"))
            nb.setdefault("metadata", {}).setdefault("language_info", {})["version"] = \
                platform.python_version()
            target.write_text(json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n",
                              encoding="utf-8")
        else:
            shutil.copyfile(path, target)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
