import sys

from door.cli import main

sys.exit(main())
