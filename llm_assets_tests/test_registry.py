"""The stage registry agrees with Dagster's asset graph, and its order is a build order."""

import dagster as dg
import pytest

from llm_assets.registry import StageSpec, check_order


def test_a_stage_listed_before_its_input_is_refused():
    check_order([StageSpec("a", "shard"), StageSpec("b", "shard", ("a",))])
    with pytest.raises(ValueError, match="stage b reads \\['a'\\]"):
        check_order([StageSpec("b", "shard", ("a",)), StageSpec("a", "shard")])


def test_every_lake_asset_has_a_spec_whose_inputs_are_its_upstreams_in_the_asset_graph():
    from llm_assets.definitions import defs
    from llm_assets.pipeline import SPECS

    graph = defs.resolve_asset_graph()
    lake_assets = {key.path[-1] for key in graph.get_all_asset_keys()
                   if graph.get(key).assets_def.get_io_manager_key_for_asset_key(key) == "lake_io_manager"}
    specs = {s.name: s for s in SPECS}
    assert lake_assets <= set(specs), f"lake assets without a spec: {lake_assets - set(specs)}"
    for spec in SPECS:
        upstream = {k.path[-1] for k in graph.get(dg.AssetKey(spec.name)).parent_keys}
        assert set(spec.inputs) <= upstream, f"{spec.name} reads {set(spec.inputs) - upstream} outside the graph"


def test_the_tokenizer_is_upstream_of_every_token():
    from llm_assets.definitions import defs

    graph = defs.resolve_asset_graph()
    for asset in ("tokenized", "release"):
        assert dg.AssetKey("tokenizer") in graph.get(dg.AssetKey(asset)).parent_keys
