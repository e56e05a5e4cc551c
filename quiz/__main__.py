"""`python -m quiz ...`: see quiz.cli."""

import sys

from quiz.cli import main

sys.exit(main())
