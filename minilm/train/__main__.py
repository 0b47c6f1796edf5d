"""``python -m minilm.train``: pretraining from the command line (see ``--help``)."""

from minilm.train.distributed import exit_process
from minilm.train.pretrain import main

exit_process(main())  # under torchrun, past gloo's teardown (see exit_process)
