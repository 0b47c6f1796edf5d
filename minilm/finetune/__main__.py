"""``python -m minilm.finetune``: fine-tuning from the command line (see ``--help``)."""

import sys

from minilm.finetune.cli import main

sys.exit(main())
