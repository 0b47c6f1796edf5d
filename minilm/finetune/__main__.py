"""``python -m minilm.finetune``: fine-tuning from the command line (see ``--help``)."""

from minilm.finetune.cli import main
from minilm.train.distributed import exit_process

exit_process(main())  # under torchrun, past gloo's teardown (see exit_process)
