import sys

from edgereason.cli.main import main

sys.exit(main())
