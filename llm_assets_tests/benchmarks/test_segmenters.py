"""benchmarks/segmenters.py measures our segmenters and datatrove's on the same text and publishes its rows."""

import re


def test_the_segmenter_benchmark_measures_both_sides_and_publishes_its_rows(tmp_path):
    from benchmarks.segmenters import measure, write

    results = measure("th", 2, 1) + measure("de", 2, 1)
    assert {(r.language, r.segmenter) for r in results} == {("th", "ours"), ("th", "datatrove"), ("de", "ours"),
                                                            ("de", "datatrove")}
    assert all(r.agreement == 1.0 and r.words > 0 and r.cpu_s[0] > 0 for r in results)
    output = tmp_path / "BENCHMARKS.md"
    output.write_text("<!-- summary:begin -->\n<!-- summary:end -->\n")
    write(output, results, "a test")
    summary = output.read_text()
    # one summary row for every segmenter: each dedicated one's cost beside datatrove's, the spaced ones' speed-up
    row = next(line for line in summary.splitlines() if line.startswith("| Word segmentation vs datatrove"))
    assert re.search(r"\| th \d+\.\d\d \(\d+\.\d\d\)", row), row  # the figures themselves are timings: not asserted
    assert "spaced languages" in row and "agreement ≥ 1.0000" in row
    assert "| th (Thai (newmm)) | ours | 1.0000 |" in (tmp_path / "benchmarks/results/segmenters.md").read_text()
