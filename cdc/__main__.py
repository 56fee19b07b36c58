"""`python -m cdc` runs the command line."""

from commands.main import run

run()
