"""The training engine: one Trainer behind every chapter and both command-line interfaces."""
