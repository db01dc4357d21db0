"""Imported by the process pool's fork server alone, first of its preload: the server dies with the process that
started it (`units.die_with_parent`). Nothing else imports this module: importing it ties the importer's life to
its parent's."""

from llm_assets.core.units import die_with_parent

die_with_parent()
