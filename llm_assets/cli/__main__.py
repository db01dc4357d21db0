"""`python -m llm_assets.cli`: the `llm-assets` command."""

import sys

from llm_assets.cli import main

sys.exit(main())
