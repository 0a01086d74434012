"""`python cli.py ...` runs the same program as the `bpestore` command."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bpestore.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
