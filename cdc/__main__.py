"""`python -m cdc` runs the command line."""

from cdc.commands.main import run

run()
