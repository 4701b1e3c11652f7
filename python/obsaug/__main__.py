"""``python -m obsaug ...``: the ``obsaug`` console command (obsaug/cli.py)."""
import sys

from .cli import main

sys.exit(main())
