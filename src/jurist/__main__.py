"""`python -m jurist` is the `jurist` command."""

from jurist.cli.main import main

main()
