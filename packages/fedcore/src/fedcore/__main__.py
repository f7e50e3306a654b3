"""``python -m fedcore`` is the ``fed`` command."""

import sys

from fedcore.cli import main

sys.exit(main())
