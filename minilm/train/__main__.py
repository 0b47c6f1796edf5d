"""``python -m minilm.train``: pretraining from the command line (see ``--help``)."""

import sys

from minilm.train.pretrain import main

sys.exit(main())
