"""The image-text pairs stage: every usable image of the shard's HTML pages with the text that describes it."""

from llm_assets.core.image_text_pairs import SCHEMA, STAGE_VERSION, ImagePairsUnit, extract_image_text_pairs
from llm_assets.core.lake import part_key
from llm_assets.core.stage_names import IMAGE_TEXT_PAIRS, RAW_FILES
from llm_assets.core.units import unit_id
from llm_assets.core.versions import code_version
from llm_assets.registry import StageSpec
from llm_assets.stage import Partition, ShardStage

# The pairs come from the same reader as documents: its settings are theirs too.
SPEC = StageSpec(IMAGE_TEXT_PAIRS, "shard", (RAW_FILES,),
                 version=lambda s: code_version(STAGE_VERSION, s.image_text_pairs.fingerprint(),
                                                s.documents.fingerprint()), job="lake_job")


class ImageTextPairs(ShardStage):
    """Image–text pairs for multimodal training: every usable `<img>` of the shard's HTML pages with its alt
    text, its `<figcaption>` caption and the text of the block around it; URLs resolved to absolute (honouring
    `<base href>`, `data-src`, `srcset`), the page it came from (page_doc_id = the page's documents doc_id).

    Dropped: data: URIs, images declared smaller than `min_side_px` (tracking pixels, spacers), images with no
    describing text, repeats of an image on the same page. Rows are pairs; the funnel counts pages.
    """

    spec = SPEC
    work = staticmethod(extract_image_text_pairs)
    row_accounting = False  # one page gives many pairs

    def units(self, p: Partition) -> list[ImagePairsUnit]:
        code, settings = SPEC.version(p.settings), p.settings
        inventory = p.inputs[RAW_FILES].scan().collect()
        units = []
        for key, size, etag in inventory.select("key", "size", "etag").iter_rows():
            unit = unit_id(SPEC.name, code, key, etag)
            units.append(ImagePairsUnit(store=p.lake.config, reader=settings.documents,
                                        settings=settings.image_text_pairs, crawl=p.crawl, source=key, size=size,
                                        unit=unit, part=part_key(SPEC.name, p.crawl, p.shard, unit)))
        return units

    def columns(self, p: Partition) -> list[str]:
        return SCHEMA.names


STAGES = [ImageTextPairs()]
