"""Command line of :mod:`course_lib.checks.sealed`: seal an answer into its assignment's
sealed_answers/<assignment>.json (the salt's first part names the assignment).

    python -m course_lib.checks.seal number VALUE --rel REL --what NAME --salt SALT \\
        [--mistake "HINT=VALUE" ...] [--hint TEXT]
    python -m course_lib.checks.seal choice ANSWER --choices A,B,C --what NAME --salt SALT \\
        [--mistake "OPTION=HINT" ...]
"""
import sys

from .sealed import main

if __name__ == "__main__":
    sys.exit(main())
