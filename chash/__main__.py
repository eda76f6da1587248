"""``python -m chash``: the same as the ``chash`` command."""
import sys

from chash.cli import main

if __name__ == "__main__":
    sys.exit(main())
