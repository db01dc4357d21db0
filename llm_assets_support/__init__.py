"""What the tests and the benchmarks both use: the shared data's paths, corpora built from it, datatrove's blocks as
an oracle, hand-labelled sets, the fault-injection harness and a headless browser. Not shipped with the package."""
