"""The stage registry agrees with Dagster's asset graph, and its order is a build order."""

import dagster as dg
import pytest

from llm_assets.registry import StageSpec, check_order


def test_a_stage_listed_before_its_input_is_refused():
    check_order([StageSpec("a", "shard"), StageSpec("b", "shard", ("a",))])
    with pytest.raises(ValueError, match="stage b reads \\['a'\\]"):
        check_order([StageSpec("b", "shard", ("a",)), StageSpec("a", "shard")])


def test_every_asset_has_a_spec_whose_inputs_are_its_upstreams_in_the_asset_graph():
    from llm_assets.definitions import defs as deployment
    from llm_assets.stages import SPECS

    graph = deployment().resolve_asset_graph()
    sources = {s.observed.name: s for s in SPECS if s.observed is not None}
    assert {key.path[-1] for key in graph.get_all_asset_keys()} == {s.name for s in SPECS} | set(sources)
    for name, spec in sources.items():  # an observed source is external, and upstream of its stage
        assert graph.get(dg.AssetKey(name)).is_external
        assert dg.AssetKey(name) in graph.get(dg.AssetKey(spec.name)).parent_keys
    for spec in SPECS:
        node = graph.get(dg.AssetKey(spec.name))
        assert set(spec.inputs) <= {k.path[-1] for k in node.parent_keys}, f"{spec.name} reads outside the graph"
        lake = node.assets_def.get_io_manager_key_for_asset_key(node.key) == "lake_io_manager"
        assert lake == (spec.level in ("shard", "crawl")), f"{spec.name}: level {spec.level}"


def test_the_tokenizer_is_upstream_of_every_token():
    from llm_assets.definitions import defs as deployment
    defs = deployment()

    graph = defs.resolve_asset_graph()
    for asset in ("tokenized", "release"):
        assert dg.AssetKey("tokenizer") in graph.get(dg.AssetKey(asset)).parent_keys
