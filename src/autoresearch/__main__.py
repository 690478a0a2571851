import sys

from autoresearch.cli import main

sys.exit(main())
