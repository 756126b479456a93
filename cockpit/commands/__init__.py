"""One module per ``cockpit`` subcommand: ``configure(parser)`` and ``run(args) -> int``."""
