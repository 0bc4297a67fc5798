import sys

from gpushare_conformance.cli import main

sys.exit(main())
