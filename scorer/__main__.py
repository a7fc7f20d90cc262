"""Entry point of ``python -m scorer`` (see :mod:`scorer.cli`)."""

import sys

from scorer.cli import main

if __name__ == "__main__":
    sys.exit(main())
