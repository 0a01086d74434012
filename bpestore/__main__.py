"""`python -m bpestore ...` runs the same program as the `bpestore` command."""

from .cli import main

main()
