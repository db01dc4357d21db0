import dagster as dg

from llm_assets.core.image_text_pairs import SCHEMA, ImagePairsUnit, extract_image_text_pairs
from llm_assets.core.lake import part_key
from llm_assets.core.partition import LakeInput
from llm_assets.core.units import unit_id
from llm_assets.image_text_pairs.spec import SPEC
from llm_assets.settings import Settings
from llm_assets.stage import partition_of, run_stage, stage_asset
from resources import ObjectStore


def build(settings: Settings) -> list[dg.AssetsDefinition]:
    code = SPEC.version(settings)

    @stage_asset(SPEC, settings, row_accounting=False)
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

    return [image_text_pairs]
