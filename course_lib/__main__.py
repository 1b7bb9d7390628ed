"""Entry point for ``python -m course_lib`` (see course_lib.cli)."""
import sys

from .cli import main

sys.exit(main())
