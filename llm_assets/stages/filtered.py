"""The filtered stage: the filter chain of the settings over every document, takedowns and decontamination included."""

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import polars as pl

from llm_assets import charts
from llm_assets.core.decontamination import NO_INDEX, contaminated_ids, eval_index, stored_index
from llm_assets.core.documents import RESERVED
from llm_assets.core.filtered import (
    NO_LANGUAGE,
    OPT_OUT_FLAGGED,
    SCHEMA,
    STAGE_VERSION,
    TAKEDOWN_COUNT,
    FilteredSettings,
    OptOuts,
    file_sha256,
    filter_documents,
    filter_units,
    language_funnels,
    languages_held,
    languages_version,
    opt_outs_version,
    with_eval_index,
    with_quality_model,
)
from llm_assets.core.filters import Decontaminate
from llm_assets.core.gates import GateResult, Profile, evaluate
from llm_assets.core.lake import contamination_key
from llm_assets.core.optouts import CrawlEvidence, coverage, crawl_evidence, part_decisions
from llm_assets.core.partition import Manifest, PartitionOutput, read_manifest
from llm_assets.core.stage_names import DOCUMENTS, FILTERED, QUALITY_CLASSIFIER
from llm_assets.core.takedowns import load_takedowns, partition_index, requests_in_partition, takedowns_version
from llm_assets.core.thresholds import record_thresholds
from llm_assets.core.units import WorkUnit
from llm_assets.core.versions import code_version, digest
from llm_assets.registry import LANGUAGES, Observed, Planner, StageSpec
from llm_assets.report import Markdown, Report, block_funnel, language_funnel_frame
from llm_assets.stage import Partition, ShardStage


def _model_block(settings: FilteredSettings):
    return next((b for b in settings.blocks() if b.name == "quality_model"), None)


def model_file(settings: FilteredSettings) -> str | None:
    """The model file the quality_model block names, when it is on and names one."""
    block = _model_block(settings)
    return block.model_path if block is not None else None


def uses_trained_model(settings: FilteredSettings) -> bool:
    """The quality_model block, when on and naming no file, filters with the model quality_classifier trained
    (whose data version then marks this stage stale)."""
    return _model_block(settings) is not None and not model_file(settings)


def _file_version(path: str) -> str:
    try:
        return file_sha256(Path(path))
    except ValueError:
        return "unreadable"  # the run reports the file by name


def chain_version(settings, *more: str) -> str:
    """What a work unit's output depends on: the chain in order with every threshold, and the bytes of a model file
    it names."""
    path = model_file(settings.filtered)
    return code_version(STAGE_VERSION, settings.filtered.fingerprint(), *([_file_version(path)] if path else []),
                        *more)


def _version(settings) -> str:
    """The chain, and the quality gate's bounds: new bounds judge every partition again, reusing its units. Its
    observed source is in it too: a partition built before it had one records none, and Dagster marks it stale for
    that, so the planner plans it as well (a rebuild reuses every unit)."""
    return chain_version(settings, settings.gates.fingerprint(), CURATION_SCOPE_NAME)


def _current_inputs(planner: Planner, crawl: str, shard: str) -> dict[str, str | None]:
    return planner.memo(("filtered inputs", crawl, shard), lambda: _inputs_now(planner, crawl, shard))


def _inputs_now(planner: Planner, crawl: str, shard: str) -> dict[str, str | None]:
    """What a build would record now: the documents' data version, the takedown requests that name a document of
    them (through each part's id index), when an eval set was added or changed, the eval index's version only
    if it flags other documents of the partition than the index it was built with, and the thresholds of the
    languages the built partition held.

    The languages are the built partition's, with the thresholds of now: exact while its documents are unchanged,
    and a partition whose documents changed is planned for that first (a partition never built is missing). The
    language identifier itself is code: a new model changes the stage's code version, and every partition."""
    docs = planner.manifest(DOCUMENTS, crawl, shard)
    if docs is None:
        return {DOCUMENTS: None}
    requests = planner.memo("takedowns", lambda: load_takedowns(planner.lake))
    named = requests_in_partition(planner.lake, docs, requests)
    evidence = planner.memo(("opt-out evidence", crawl), lambda: evidence_of(
        planner.lake, planner.settings, crawl, lambda shard: planner.manifest(DOCUMENTS, crawl, shard)))
    current: dict[str, str | None] = {DOCUMENTS: docs.data_version, "takedowns": takedowns_version(named),
                                      OPT_OUTS: partition_opt_outs(opt_outs_of(planner.lake, planner.settings,
                                                                               [docs], evidence))}
    built = planner.manifest(FILTERED, crawl, shard)
    block = planner.settings.filtered.block("decontaminate")
    if isinstance(block, Decontaminate) and block.enabled:
        current["evals"] = _evals(planner, built, docs, block.min_matches)
    # a partition built before its languages were recorded is planned for its code version
    if built is not None and LANGUAGES_INPUT in built.inputs:
        current[LANGUAGES_INPUT] = languages_version(lambda language: _fingerprint(planner, language),
                                                     languages_held(built.counts()))
    return current


OPT_OUTS = "opt_outs"  # the manifest's input: the opt-out decisions over its documents (`partition_opt_outs`)


def evidence_of(lake, settings, crawl: str, documents: Callable[[str], Manifest | None]) -> CrawlEvidence:
    """The crawl's opt-out evidence: the policy files every shard's documents kept, and the `robots/` zone's."""
    manifests = [m for shard in settings.shard_keys() if (m := documents(shard)) is not None]
    return crawl_evidence(lake, crawl, manifests, settings.opt_outs.cutoff)


def opt_outs_of(lake, settings, docs: Sequence[Manifest], found: CrawlEvidence) -> dict[str, OptOuts]:
    """Per documents part, the documents an opt-out covers. A partition's hosts are looked up in its index first
    (one read), a part's only where it may hold one of them, and a part is read only when it may hold a covered
    document."""
    s = settings.opt_outs
    if not s.enabled:
        return {part: OptOuts(()) for m in docs for part in m.parts}
    out: dict[str, OptOuts] = {}
    for m in docs:
        reserved = {u.part for u in m.units if u.part and any(k.startswith(RESERVED) for k in u.counts)}
        evidence = found.evidence.of_hosts(partition_index(lake, m)) if found.evidence.by_host else found.evidence
        for part in m.parts:
            out[part] = OptOuts.of(part_decisions(lake, part, part in reserved, evidence, s), s.mode == "flag")
    return out


def partition_opt_outs(opt_outs: Mapping[str, OptOuts]) -> str:
    """What a partition records of its opt-outs: a new capture, agent or list that covers no other document of it
    leaves it as it was, so the planner plans only the partitions a policy change touches."""
    return digest("opt_outs", *(f"{part}={opt_outs_version(o)}" for part, o in sorted(opt_outs.items())
                                if o.decisions))


LANGUAGES_INPUT = "languages"  # the manifest's input: `languages_version` of the languages the partition held
LANGUAGE_INPUT = "language:"  # + language: that language's fingerprint, which names it in the cause


def language_inputs(settings: FilteredSettings, counts: Mapping[str, int]) -> dict[str, str]:
    """What a built partition records of its languages (from its units' counts): the version of their thresholds,
    which the planner compares, and each one's fingerprint, which says which changed."""
    held = languages_held(counts)
    return {LANGUAGES_INPUT: languages_version(settings.language_fingerprint, held),
            **{LANGUAGE_INPUT + language: settings.language_fingerprint(language) for language in held}}


def _fingerprint(planner: Planner, language: str) -> str:
    """A language's fingerprint under the planner's settings, once per planning pass (0.05-0.1 ms each: a lake
    holds tens of languages in each of thousands of partitions)."""
    return planner.memo(("language fingerprint", language),
                        lambda: planner.settings.filtered.language_fingerprint(language))


def _cause(planner: Planner, built: Manifest, name: str) -> str | None:
    if name != LANGUAGES_INPUT:
        return None
    changed = [language for language in languages_held(built.counts())
               if built.inputs.get(LANGUAGE_INPUT + language) != _fingerprint(planner, language)]
    return f"{LANGUAGES} ({', '.join(changed)})" if changed else None


def _evals(planner: Planner, built: Manifest | None, docs: Manifest, min_matches: int) -> str:
    version = planner.memo("eval_index", lambda: eval_index(planner.lake, planner.settings.evals).version)
    recorded = built.inputs.get("evals") if built is not None else None
    if built is None or recorded is None or recorded == version:
        return version
    before, now = (_flagged(planner, built, docs, v, min_matches) for v in (recorded, version))
    return recorded if before is not None and before == now else version


def _flagged(planner: Planner, built: Manifest, docs: Manifest, version: str, min_matches: int) -> list[str] | None:
    """The documents of a committed partition (kept, or dropped as contaminated) that an eval index flags, in their
    final text or in their text as extracted (the documents partition's), as the decontaminate block checks them;
    kept in the lake once computed, so the stale sensor checks a partition against an index once."""
    key = contamination_key("filtered", built.crawl, built.shard, built.data_version,
                            f"{version}-{min_matches}-extracted")
    if (cached := planner.lake.get_json(key)) is not None:
        return cached["flagged"]
    index = planner.memo(("eval_index", version), lambda: stored_index(planner.lake, version))
    if index is None and version != NO_INDEX:
        return None  # an index that is gone: the partition is rebuilt
    final = pl.concat([
        planner.lake.scan(built.parts).select("doc_id", "text").collect() if built.parts else pl.DataFrame(),
        planner.lake.scan(built.rejected_parts).filter(pl.col("filter") == "decontaminate")
        .select("doc_id", "text").collect() if built.rejected_parts else pl.DataFrame(),
    ], how="diagonal")
    if not final.width:
        flagged: list[str] = []
    else:
        extracted = planner.lake.scan(docs.parts).select("doc_id", "text").collect() \
            .join(final.select("doc_id"), on="doc_id", how="semi") if docs.parts else final.clear()
        flagged = sorted(set(contaminated_ids(index, final, min_matches))
                         | set(contaminated_ids(index, extracted, min_matches)))
    planner.lake.put_json(key, {"flagged": flagged})
    return flagged


CURATION_SCOPE_NAME = "curation_scope"
# What filtered reads besides its documents, as its manifest records it. The languages' thresholds are settings, but
# they change what a partition holds only where it holds the language: carried per partition, like the lists.
CURATION = ("takedowns", OPT_OUTS, "evals", LANGUAGES_INPUT)


def _curation_version(inputs) -> str:
    return digest(*(f"{k}={inputs.get(k) or ''}" for k in CURATION))


def _curation_now(planner: Planner, crawl: str, shard: str) -> str | None:
    current = _current_inputs(planner, crawl, shard)
    return _curation_version(current) if current.get("documents") is not None else None


CURATION_SCOPE = Observed(
    CURATION_SCOPE_NAME,
    "The takedown requests, eval sets and language thresholds as they touch one crawl × shard: the version of the "
    "requests that name a "
    "document of the partition (through each part's id index) and of the eval index, counted only when it flags "
    "other documents of the partition than the index `filtered` was built with. A new request or eval set changes "
    "it for exactly the partitions it touches, so the UI marks those `filtered` partitions stale, and only those, "
    "as `llm-assets stale` plans them. It also carries the thresholds of the languages each partition held: a "
    "change of one language's thresholds (the settings' `overrides`, the language table, the languages kept) "
    "changes it only for the partitions that held a document in that language. Reported by the stale planner "
    "(`llm-assets stale`, `backfill --stale`, `stale_sensor`).",
    current=_curation_now, recorded=lambda built: _curation_version(built.inputs), deps=("takedowns", "eval_index"))

SPEC = StageSpec(FILTERED, "shard", (DOCUMENTS,), version=_version, current_inputs=_current_inputs,
                 observed=CURATION_SCOPE, cause=_cause, job="lake_job", documents=True)
READ = "read"  # the model, eval index and takedowns a partition's units read (`Partition.notes`)
LANGUAGES_SHOWN = 20  # in the per-language funnel's table and chart, the languages with most documents


class Filtered(ShardStage):
    """Documents that no takedown request names (under `takedowns/`), that no opt-out covers (`opt_outs`: a host's
    robots.txt barring an AI agent, TDMRep by header, `<meta>` or tdmrep.json, `noai`, ai.txt; from the crawl's own
    policy files and those dropped under `robots/<crawl>/`), and that pass the filter chain of the settings, in
    FineWeb's order: text normalization (NFC,
    control characters, mojibake, whitespace), URL block lists, fastText lid.176 language ID (the settings' keep
    list, each language at its own minimum score; a script lid.176 does not know is `und`, dropped), then, with
    each language's thresholds (FineWeb-2's per-language configs; English keeps FineWeb's), Gopher
    repetition, Gopher quality, C4 quality (its line cleanup rewrites the text; not for FineWeb-2's languages),
    FineWeb quality, the optional C4 bad-words, profanity, domain-vocabulary and model-based quality blocks, and PII
    masking (e-mails, public IPs, phone numbers, Luhn-valid cards, IBANs become typed placeholders), and last
    decontamination against the eval sets under `evals/` (13-gram overlap in the final text or in the text as
    extracted, before C4's line cleanup or PII masks rewrote it; drops, or flags by setting).

    Adds `language`, `language_score`, `n_words`, `pii` (masked per type), `contamination` and the optional
    blocks' densities and quality score.
    Every dropped document is kept under `rejected/filtered/` with the block and reason code that dropped it
    (`takedown` with the request, `opt_out` with the capture, rule line and date, `contaminated` with the benchmark
    and the matched span). Every block measures
    every document, kept or dropped before it; each unit keeps those scores beside its part (`scores-<unit>`),
    so a change of thresholds only is decided again over the whole crawl without a re-run.
    One work unit per upstream documents part; a takedown reruns only the units whose part held the document,
    and a change of one language's thresholds (`filtered.overrides`, the language table, the languages kept) only
    the units that held a document in that language. `language_funnel` (table and chart) gives each language's
    own funnel: documents in, kept, dropped by each block.

    Quality gate (`gates:`): a partition whose blocks' fail rates (from the scores) or language mix depart from
    the other partitions of its crawl is committed held back: its `quality_gate` check fails and downstream
    stages keep what they were built from until a rebuild passes.
    """

    spec = SPEC
    work = staticmethod(filter_documents)

    def deps(self, settings, specs) -> list[str]:
        # The takedown requests and eval sets reach it through its observed source (`curation_scope`, which depends
        # on `takedowns` and `eval_index`): a new request makes stale the partitions it touches, not every partition.
        return [QUALITY_CLASSIFIER] if uses_trained_model(settings.filtered) else []

    def definition_metadata(self, settings) -> Report:
        return {"filter_chain": " → ".join(self.chain(settings))}

    @staticmethod
    def chain(settings) -> list[str]:
        return [block.name for block in settings.filtered.blocks()]

    def units(self, p: Partition) -> Sequence[WorkUnit]:
        filters, model = with_quality_model(p.settings.filtered, p.lake)
        filters, evals = with_eval_index(filters, p.lake, p.settings.evals)
        built = read_manifest(p.lake, SPEC.name, p.crawl, p.shard)
        found = evidence_of(p.lake, p.settings, p.crawl, lambda shard: read_manifest(p.lake, DOCUMENTS, p.crawl, shard))
        for problem in found.problems:
            p.log.warning(f"opt-out evidence: {problem}")
        opt_outs = opt_outs_of(p.lake, p.settings, p.inputs[DOCUMENTS].manifests, found)
        units, named = filter_units(p.lake, p.lake.config, filters, p.settings.filtered, p.crawl, p.shard,
                                    p.inputs[DOCUMENTS].parts, chain_version(p.settings),
                                    [*([model] if model else []), evals], load_takedowns(p.lake),
                                    {u.source: u for u in built.units} if built is not None else {}, opt_outs)
        p.notes[READ] = (model, evals, takedowns_version(named))
        p.notes[OPT_OUTS] = (opt_outs, found)
        return units

    def recorded_inputs(self, p: Partition) -> dict[str, str]:
        model, evals, takedowns = p.notes[READ]
        return {DOCUMENTS: p.inputs[DOCUMENTS].data_version, "takedowns": takedowns,
                OPT_OUTS: partition_opt_outs(p.notes[OPT_OUTS][0]),
                **({"evals": evals} if evals else {}), **({"quality_model": model} if model else {})}

    def metadata(self, p: Partition) -> Report:
        model, evals, _ = p.notes[READ]
        return {"eval_index": evals or "off", **({"quality_model_sha256": model} if model else {})}

    def outcome_inputs(self, p: Partition, out: PartitionOutput) -> dict[str, str]:
        """The languages' inputs of the manifest, their thresholds kept in the lake before it names them (`why`)."""
        record_thresholds(p.lake, p.settings.filtered, languages_held(out.counts()))
        return language_inputs(p.settings.filtered, out.counts())

    def columns(self, p: Partition) -> list[str]:
        return SCHEMA.names

    def gated(self, settings) -> bool:
        return settings.gates.enabled

    def gate(self, p: Partition, out: PartitionOutput) -> GateResult:
        """This partition against the other partitions of its crawl that passed theirs."""
        others = [Profile.of(s, m.rows_in, m.dropped(), m.counts()) for s in p.settings.shard_keys() if s != p.shard
                  and (m := read_manifest(p.lake, SPEC.name, p.crawl, s)) is not None and not m.held_back]
        return evaluate(Profile.of(p.shard, out.rows_in, out.dropped(), out.counts()), others, self.chain(p.settings),
                        p.settings.gates)

    def report(self, p: Partition, out: PartitionOutput) -> Report:
        """The block funnel, the kept documents' languages and lengths, each language's funnel, PII masked, the
        takedowns applied and the opt-outs honoured."""
        blocks = p.settings.filtered.funnel()
        counts = out.counts()
        by_block = {b: sum(n for k, n in out.dropped().items() if k.split("/", 1)[0] == b)
                    for b in dict.fromkeys(blocks)}
        kept = p.lake.scan(parts).select("language", "n_words").collect() if (parts := [
            u.part for u in out.units if u.part and u.rows_out]) else pl.DataFrame({"language": [], "n_words": []})
        languages = kept.group_by("language").len().sort("len", descending=True).head(15)
        funnels = language_funnels(counts)[:LANGUAGES_SHOWN]
        pii = {k: n for k, n in counts.items() if k.startswith("pii_")}
        return {
            "filter_funnel": Markdown(block_funnel(blocks, out.rows_in, out.dropped())),
            "filter_funnel_chart": Markdown(charts.funnel(
                "documents in, dropped by each block (chain order), kept", out.rows_in,
                [(b, n) for b, n in by_block.items() if n], out.rows_out)),
            "language_chart": Markdown(charts.hbars(
                "language of the kept documents (fastText lid.176)",
                languages["language"].fill_null(charts.NO_LANGUAGE).to_list(), languages["len"].to_list(),
                "documents")),
            "length_chart": Markdown(charts.histogram(
                "length of the kept documents", kept["n_words"].to_list(), "words per document")),
            "language_funnel": language_funnel_frame(funnels, blocks),
            "language_funnel_chart": Markdown(charts.stacked(
                "documents per language: kept, dropped by each block",
                [charts.NO_LANGUAGE if f.language == NO_LANGUAGE else f.language for f in funnels],
                {"kept": [f.kept for f in funnels],
                 **{b: [f.dropped.get(b, 0) for f in funnels] for b in by_block if by_block[b]}}, "documents")),
            "pii_masked": pii,
            "pii_masked_total": sum(pii.values()),
            "takedowns_applied": {k.removeprefix(TAKEDOWN_COUNT): n for k, n in counts.items()
                                  if k.startswith(TAKEDOWN_COUNT)},
            **opt_out_report(p, out),
        }


def opt_out_report(p: Partition, out: PartitionOutput) -> Report:
    """Per policy kind, the documents and hosts an opt-out covered (dropped, or flagged) and the dates of the
    evidence; the agents honoured; the policy files that could not be read as written, named."""
    opt_outs, found = p.notes[OPT_OUTS]
    decided = pl.concat([o.frame() for o in opt_outs.values()] or [OptOuts(()).frame()])
    s = p.settings.opt_outs
    return {
        "opt_outs": coverage(decided),
        "opt_outs_honoured": {"enabled": s.enabled, "mode": s.mode, "kinds": list(s.honour),
                              "agents": list(s.agents), "agents_as_of": s.agents_as_of.isoformat(),
                              "retroactive": s.retroactive,
                              "cutoff": s.cutoff.isoformat() if s.cutoff else None,
                              "hosts_with_evidence": len(found.evidence.hosts)},
        "opt_outs_flagged": {k.removeprefix(OPT_OUT_FLAGGED): n for k, n in out.counts().items()
                             if k.startswith(OPT_OUT_FLAGGED)},
        **({"opt_out_evidence_problems": list(found.problems)} if found.problems else {}),
    }


STAGES = [Filtered()]
