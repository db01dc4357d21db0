"""The name of every stage's asset, as constants the type checker sees: a misspelt stage is an error where it is
written, not an asset missing at run time. The stage modules name their specs and inputs with these."""

from typing import Final

TAKEDOWNS: Final = "takedowns"
EVAL_INDEX: Final = "eval_index"
RAW_FILES: Final = "raw_files"
DOCUMENTS: Final = "documents"
IMAGE_TEXT_PAIRS: Final = "image_text_pairs"
FILTERED: Final = "filtered"
SIGNATURES: Final = "signatures"
DUPLICATE_CLUSTERS: Final = "duplicate_clusters"
DEDUPLICATED: Final = "deduplicated"
CRAWL_STATS: Final = "crawl_stats"
QUALITY_CLASSIFIER: Final = "quality_classifier"
TOKENIZER: Final = "tokenizer"
TOKENIZED: Final = "tokenized"
ENRICHED: Final = "enriched"
RELEASE: Final = "release"
COST: Final = "cost"
