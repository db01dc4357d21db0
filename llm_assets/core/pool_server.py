"""Imported by the process pool's fork server alone, first of its preload: the server dies with the process that
started it (`units.die_with_parent`), and loads what its starter asked it to (`units.Warmup`, e.g. the tokenizer)
before it forks any worker. Nothing else imports this module: importing it ties the importer's life to its
parent's."""

import os

from llm_assets.core.units import die_with_parent, pool_warmups

die_with_parent()
# No thread pool in a process that forks: a tokenizer's warm-up must not start its Rayon threads here (a forked
# child gets none of them, and `tokenizers` then turns its parallelism off). Workers get the caller's environment.
os.environ["TOKENIZERS_PARALLELISM"] = "false"
pool_warmups()
