"""``python -m wai``: the same command line as ``wai``."""

from __future__ import annotations

import sys

from wai.cli import main

if __name__ == "__main__":
    sys.exit(main())
