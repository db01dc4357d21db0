"""Filter blocks: one small unit per published rule, typed thresholds with the published defaults, a reason code
for every document it drops. `apply_filters` runs a chain of them over a Polars batch.

A chain is an ordered list of blocks, each named by its `block` field (`ChainBlock` validates one entry of the
settings' list); `DEFAULT_CHAIN` is FineWeb's order, then the optional blocks (off), PII masking, then decontamination
last. Its values are FineWeb's (English); each other language takes FineWeb-2's from the language table
(`FilteredSettings.chain_for`)."""

from typing import Annotated, Union

from pydantic import Field

from llm_assets.core.filters.base import Block, Scored, apply_filters, score_filters
from llm_assets.core.filters.c4 import C4BadWords, C4Quality
from llm_assets.core.filters.decontaminate import Decontaminate
from llm_assets.core.filters.fineweb import FineWebQuality
from llm_assets.core.filters.gopher import GopherQuality, GopherRepetition
from llm_assets.core.filters.language import DEFAULT_LANGUAGES, LanguageFilter, language_model
from llm_assets.core.filters.normalize import Normalize
from llm_assets.core.filters.pii import PIIMasker
from llm_assets.core.filters.profanity import ProfanityFilter
from llm_assets.core.filters.quality_model import QualityModelFilter
from llm_assets.core.filters.url import URLFilter
from llm_assets.core.filters.vocabulary import DomainVocabulary

ChainBlock = Annotated[
    Union[Normalize, URLFilter, LanguageFilter, GopherRepetition, GopherQuality, C4Quality, FineWebQuality, C4BadWords,
          ProfanityFilter, DomainVocabulary, QualityModelFilter, PIIMasker, Decontaminate],
    Field(discriminator="block"),
]

DEFAULT_CHAIN: tuple[ChainBlock, ...] = (
    Normalize(), URLFilter(), LanguageFilter(languages=DEFAULT_LANGUAGES), GopherRepetition(), GopherQuality(),
    C4Quality(filter_no_terminal_punct=False),  # as FineWeb runs it
    FineWebQuality(), C4BadWords(), ProfanityFilter(), DomainVocabulary(), QualityModelFilter(), PIIMasker(),
    Decontaminate(),  # last: see its module
)

__all__ = [
    "ChainBlock", "DEFAULT_CHAIN", "DEFAULT_LANGUAGES",
    "Block", "C4BadWords", "C4Quality", "Decontaminate", "DomainVocabulary", "FineWebQuality", "GopherQuality",
    "GopherRepetition", "LanguageFilter", "Normalize", "PIIMasker", "ProfanityFilter", "QualityModelFilter", "Scored",
    "URLFilter", "apply_filters",
    "language_model", "score_filters",
]
