"""`python -m tiledsl ...`: the same command line as `tiledsl ...`."""

import sys

from .cli import main

sys.exit(main())
