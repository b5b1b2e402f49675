"""``python -m engram.serve.cli``: the ``engram`` command."""

import sys

from engram.serve.cli import main

sys.exit(main())
