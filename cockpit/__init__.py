"""cockpit: the UI-free core of the GPU driver change-window cockpit.

Nothing in this package imports Textual; only ``cockpit.cli`` may import the
``screens`` package, lazily, for the subcommands that open the terminal UI.
"""

__version__ = "0.1.0"
