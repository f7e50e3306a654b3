"""``python -m fedcore`` is the ``fed`` command."""

import sys

from fedcore.cli.main import main

sys.exit(main())
