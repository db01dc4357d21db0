"""The documents stage: every raw file read (whatever its format) into documents with their provenance."""

from typing import Literal

from pydantic import BaseModel

from llm_assets.core import route_model
from llm_assets.core.documents import EXTRACTED_BY, ROUTED_FOR, SCHEMA, STAGE_VERSION, extract_documents, extract_units
from llm_assets.core.partition import PartitionOutput
from llm_assets.core.stage_names import DOCUMENTS, RAW_FILES
from llm_assets.core.units import WorkUnit
from llm_assets.core.versions import code_version
from llm_assets.registry import StageSpec
from llm_assets.report import Report
from llm_assets.stage import Partition, ShardStage

# The routing model is data the stage's output depends on: a retrained model is a new code version.
SPEC = StageSpec(DOCUMENTS, "shard", (RAW_FILES,),
                 version=lambda s: code_version(STAGE_VERSION, s.documents.fingerprint(), route_model.fingerprint()),
                 job="lake_job", documents=True)


class DocumentsOptions(BaseModel):
    """Per-run choice of extractor; empty means the settings file's. The choice is part of every work unit's id, so
    a run with another extractor writes other parts rather than passing them off as the default's."""

    extractor: Literal["", "routed", "trafilatura", "resiliparse", "trafilatura_fast"] = ""


class Documents(ShardStage):
    """Documents from the shard's raw files, whatever their format (sniffed from the bytes: WARC/ARC with gzip
    per record, whole-file gzip or none, WET, JSON Lines / JSON in gzip or zstd, Parquet, loose HTML).

    HTML responses (2xx, HTML by header and by sniffing) get their main text extracted, with title and date:
    by default trafilatura with FineWeb's settings, except the pages that would cost most of its time (very
    long HTML, many tags, a host over budget before, or over its CPU budget), which resiliparse extracts (the
    `routing` settings), and many pages of one host that extract to one identical text (a sidebar), which the
    other extractor extracts again (the `collapse` settings); charsets come from the HTTP header, then `<meta>`,
    then detection. Each document keeps
    its provenance: doc_id, URL, domain, crawl, source key, record offset, WARC-Record-ID, fetch time, content
    type, charset, extractor and version (and why it was routed: `resiliparse 2.0.0 (routed: budget)`), and the
    response's own reservation of text and data mining (`reservation`: a `tdm-reservation` or `X-Robots-Tag: noai`
    header, or the same in a `<meta>` tag). Metadata: `pages_by_extractor`, `pages_routed_by_reason`.

    A host's policy files (robots.txt, `/.well-known/tdmrep.json`, ai.txt, whatever their status) are set aside as
    `policy_file` and kept beside the unit's part as opt-out evidence for `filtered`.
    Skipped records are counted by reason (not_response, revisit, non_2xx, non_html, no_text, policy_file); those
    skipped for their content (non_2xx, non_html, no_text, policy_file) are kept under `rejected/documents/` with URL
    and doc id, indexed, so `llm-assets why URL` finds them; bad ones (truncated_file, corrupt_record, oversized,
    non_html_payload, extraction_timeout, corrupt_json, missing_text, unreadable_file) are quarantined there. One
    work unit per raw file, several for a WARC or ARC file over 512 KiB (each reads a byte range of it, so that both
    workers do).
    """

    spec = SPEC
    work = staticmethod(extract_documents)
    Options = DocumentsOptions

    def extractor(self, p: Partition) -> str:
        return p.options.extractor if p.options is not None and p.options.extractor else \
            p.settings.documents.extractor

    def units(self, p: Partition) -> list[WorkUnit]:
        inventory = p.inputs[RAW_FILES].scan().collect()
        code, extractor = SPEC.version(p.settings), self.extractor(p)
        return [unit for key, size, etag in inventory.select("key", "size", "etag").iter_rows()
                for unit in extract_units(p.lake.config, p.settings.documents, p.crawl, p.shard, key, size, etag,
                                          code, extractor)]

    def columns(self, p: Partition) -> list[str]:
        return SCHEMA.names

    def metadata(self, p: Partition) -> Report:
        return {"extractor": self.extractor(p)}

    def report(self, p: Partition, out: PartitionOutput) -> Report:
        """HTML pages per extractor that made them, and the pages routed to the fast extractor per reason."""
        counts = out.counts()
        return {"pages_by_extractor": {k.removeprefix(EXTRACTED_BY): n for k, n in sorted(counts.items())
                                       if k.startswith(EXTRACTED_BY)},
                "pages_routed_by_reason": {k.removeprefix(ROUTED_FOR): n for k, n in sorted(counts.items())
                                           if k.startswith(ROUTED_FOR)}}


STAGES = [Documents()]
