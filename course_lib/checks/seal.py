"""Command line of :mod:`course_lib.checks.sealed`: print a ``Sealed(...)`` literal.

    python -m course_lib.checks.seal number VALUE --rel REL --what NAME --salt SALT \\
        [--mistake "HINT=VALUE" ...] [--hint TEXT]
    python -m course_lib.checks.seal choice ANSWER --choices A,B,C --what NAME --salt SALT \\
        [--mistake "OPTION=HINT" ...]
"""
import sys

from .sealed import main

if __name__ == "__main__":
    sys.exit(main())
