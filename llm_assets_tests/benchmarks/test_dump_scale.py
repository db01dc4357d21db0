"""bench-dump-scale's synthetic signatures: the planted copies are what the clustering must remove."""

import numpy as np

from benchmarks.dump_scale import synthesize


def test_synthetic_signatures_plant_a_twentieth_exact_and_a_twentieth_near_copies():
    frame, stats, source = synthesize(2_000, seed=7, first=1_000)
    assert frame.height == 2_000 and stats["exact_copies"] == stats["near_copies"] == 100
    copies = np.flatnonzero(source >= 0)
    assert len(copies) == 200 and not np.isin(source[copies] - 1_000, copies).any()  # a source is never a copy
    bands = np.vstack(frame["bands"].to_numpy())
    assert (bands[copies] == bands[source[copies] - 1_000]).any(axis=1).all()  # every copy shares a band
    assert frame["doc_id"][0] == "doc-000001000"
