"""``python -m search`` is ``python -m search.tune``."""

import sys

from .tune import main

if __name__ == "__main__":
    sys.exit(main())
