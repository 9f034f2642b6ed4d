import sys

from door.memory import on_malloc

on_malloc()  # before the app's modules are imported: a flood's memory goes back after it (door.memory)

from door.cli import main  # noqa: E402

sys.exit(main())
