import sys

from demos.cli import main

sys.exit(main())
