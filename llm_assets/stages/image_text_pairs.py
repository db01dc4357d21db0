"""The image-text pairs stage: every usable image of the shard's HTML pages with the text that describes it."""

from collections.abc import Sequence
from typing import TYPE_CHECKING

from llm_assets.core.image_text_pairs import STAGE_VERSION
from llm_assets.core.versions import code_version
from llm_assets.registry import StageSpec

# The pairs come from the same reader as documents: its settings are theirs too.
SPEC = StageSpec("image_text_pairs", "shard", ("raw_files",),
                 version=lambda s: code_version(STAGE_VERSION, s.image_text_pairs.fingerprint(),
                                                s.documents.fingerprint()), job="lake_job")
SPECS = [SPEC]

if TYPE_CHECKING:
    import dagster as dg

    from llm_assets.settings import Settings


def build(settings: "Settings", specs: "Sequence[StageSpec]") -> "dg.Definitions":
    import dagster as dg

    from llm_assets.core.image_text_pairs import SCHEMA, ImagePairsUnit, extract_image_text_pairs
    from llm_assets.core.lake import part_key
    from llm_assets.core.partition import LakeInput
    from llm_assets.core.units import unit_id
    from llm_assets.stage import partition_of, run_stage, stage_asset
    from resources import ObjectStore

    code = SPEC.version(settings)

    @stage_asset(SPEC, settings, specs, row_accounting=False)
    def image_text_pairs(context: dg.AssetExecutionContext, store: ObjectStore, raw_files: LakeInput):
        """Image–text pairs for multimodal training: every usable `<img>` of the shard's HTML pages with its alt
        text, its `<figcaption>` caption and the text of the block around it; URLs resolved to absolute (honouring
        `<base href>`, `data-src`, `srcset`), the page it came from (page_doc_id = the page's documents doc_id).

        Dropped: data: URIs, images declared smaller than `min_side_px` (tracking pixels, spacers), images with no
        describing text, repeats of an image on the same page. Rows are pairs; the funnel counts pages.
        """
        crawl, shard = partition_of(context)
        inventory = raw_files.scan().collect()
        units = []
        for key, size, etag in inventory.select("key", "size", "etag").iter_rows():
            unit = unit_id("image_text_pairs", code, key, etag)
            units.append(ImagePairsUnit(store=store.config(), reader=settings.documents,
                                        settings=settings.image_text_pairs, crawl=crawl, source=key, size=size,
                                        unit=unit, part=part_key("image_text_pairs", crawl, shard, unit)))
        yield from run_stage(context, extract_image_text_pairs, units, code, SCHEMA.names, settings.runner,
                             row_accounting=False, inputs={"raw_files": raw_files.data_version})

    return dg.Definitions(assets=[image_text_pairs])
