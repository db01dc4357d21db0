"""Charts as PNG images in asset metadata, the way Dagster's own tutorial shows them: a matplotlib figure,
base64-encoded into a Markdown image (`MetadataValue.md`). Sized for the metadata panel (720 px wide), labelled
with their unit, numbers rounded for people. matplotlib is imported when a chart is drawn, not at start-up."""

from __future__ import annotations

import base64
import functools
import hashlib
import io
from collections.abc import Callable, Mapping, Sequence

WIDTH_IN, DPI = 7.2, 100  # 720 px: the width of the metadata panel
BLUE, RED, GREEN = "#4c78a8", "#e45756", "#54a24b"
LEGEND_COLUMNS = 5  # a legend under a chart: segments per row
# A kept document has no language when the chain holds no language block (or its text gave lid.176 nothing).
NO_LANGUAGE = "not identified (no language ID)"


def human(n: float) -> str:
    """12,345 → 12.3k; 0.1234 → 0.12: what a person reads off a chart."""
    if abs(n) >= 1e9:
        return f"{n / 1e9:.1f}B"
    if abs(n) >= 1e6:
        return f"{n / 1e6:.1f}M"
    if abs(n) >= 1e4:
        return f"{n / 1e3:.1f}k"
    return f"{n:,.0f}" if float(n).is_integer() or abs(n) >= 100 else f"{n:.2f}"


def _plain(value):
    """The value as plain Python, in full: a key that two different charts never share (a long array's repr elides
    its middle)."""
    if isinstance(value, Mapping):
        return tuple((k, _plain(v)) for k, v in value.items())
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return tuple(_plain(v) for v in value)


def _drawn_once(draw: Callable[..., str]) -> Callable[..., str]:
    """The same chart asked for again in this process is the image drawn the first time: a run of many partitions
    draws each stage's charts of its empty partitions once (a chart costs ~0.1 CPU-s, more than a small partition's
    own work)."""
    drawn: dict[bytes, str] = {}

    @functools.wraps(draw)
    def chart(*args, **kwargs) -> str:
        key = hashlib.sha256(repr((_plain(args), _plain(kwargs))).encode()).digest()
        if key not in drawn:
            if len(drawn) >= 128:
                drawn.clear()
            drawn[key] = draw(*args, **kwargs)
        return drawn[key]

    return chart


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    return plt


def _integer_ticks():
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(nbins=6, integer=True)  # counts: no 0.5 documents; few enough ticks for 18,000 to fit


def _count_labels(top: float):
    """Tick labels of a count axis: 2,000 rather than 2000; 40k rather than 40000 once counts pass 10,000."""
    from matplotlib.ticker import FuncFormatter

    if top >= 1e4:
        return FuncFormatter(lambda v, _: f"{v / 1e3:,.0f}k" if v else "0")
    return FuncFormatter(lambda v, _: f"{v:,.0f}")


def _value_axis(ax, top: float, counts: bool) -> None:
    """The value axis from 0: whole counts (`_integer_ticks`), or any amount (hours, money), labelled with three
    significant digits, which 0.0012 CPU-hours needs."""
    ax.set_xlim(0, top * 1.15)
    if counts:
        ax.xaxis.set_major_locator(_integer_ticks())
        ax.xaxis.set_major_formatter(_count_labels(top * 1.15))
    else:
        from matplotlib.ticker import FuncFormatter, MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))


def _label(v: float, counts: bool) -> str:
    return human(v) if counts else f"{v:.3g}"


def _markdown(fig, title: str) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)  # exactly 720 px wide: the layout fits the labels in
    _pyplot().close(fig)
    return f"![{title}](data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()})"


@_drawn_once
def hbars(title: str, labels: Sequence[str], values: Sequence[float], unit: str,
          colors: Sequence[str] | None = None, counts: bool = True) -> str:
    """Horizontal bars, first label on top, each bar with its value: funnels, language mixes, counts per key
    (`counts=False`: amounts such as hours or money)."""
    plt = _pyplot()
    n = max(1, len(labels))
    fig, ax = plt.subplots(figsize=(WIDTH_IN, max(1.6, 0.9 + 0.32 * n)), layout="constrained")
    y = list(range(n))[::-1]
    ax.barh(y[:len(values)], values, color=list(colors) if colors else BLUE)
    ax.set_yticks(y[:len(labels)], [str(label)[:48] for label in labels])
    top = max(values, default=0) or 1
    for yi, v in zip(y, values, strict=False):  # y has a row even when there are no values
        ax.text(v + top * 0.01, yi, _label(v, counts), va="center", fontsize=8)
    _value_axis(ax, top, counts)
    ax.set_xlabel(unit)
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")  # the figure's left edge: long labels do not push it out
    ax.spines[["top", "right"]].set_visible(False)
    return _markdown(fig, title)


@_drawn_once
def grouped_hbars(title: str, labels: Sequence[str], series: dict[str, Sequence[float]], unit: str) -> str:
    """Horizontal bars, a group per label (first on top) with one bar per series: shares of documents and tokens
    per language, side by side."""
    plt = _pyplot()
    n, k = max(1, len(labels)), max(1, len(series))
    fig, ax = plt.subplots(figsize=(WIDTH_IN, max(1.8, 1.1 + 0.3 * n * k)), layout="constrained")
    height = 0.8 / k
    top = max((v for values in series.values() for v in values), default=0) or 1
    for j, ((name, values), color) in enumerate(zip(series.items(), (BLUE, GREEN, RED), strict=False)):
        y = [(n - 1 - i) + (k - 1 - j - (k - 1) / 2) * height for i in range(len(values))]
        ax.barh(y, values, height=height, color=color, label=name)
        for yi, v in zip(y, values, strict=True):
            ax.text(v + top * 0.01, yi, f"{v:.1%}" if unit == "share" else human(v), va="center", fontsize=7)
    ax.set_yticks(list(range(n))[::-1][:len(labels)], [str(label)[:48] for label in labels])
    ax.set_xlim(0, top * 1.18)
    ax.set_xlabel(unit)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    ax.spines[["top", "right"]].set_visible(False)
    return _markdown(fig, title)


def funnel(title: str, rows_in: int, drops: Sequence[tuple[str, int]], rows_out: int, unit: str = "documents") -> str:
    """In, then what each step dropped (red), then out (green)."""
    labels = ["in", *(label for label, _ in drops), "out"]
    values = [rows_in, *(n for _, n in drops), rows_out]
    return hbars(title, labels, values, unit, [BLUE, *([RED] * len(drops)), GREEN])


@_drawn_once
def stacked(title: str, labels: Sequence[str], segments: dict[str, Sequence[float]], unit: str,
            counts: bool = True, legend_below: bool = False) -> str:
    """Horizontal bars split into segments, first label on top, a legend naming the segments: a funnel per language
    (kept in green, then what each block dropped); `counts=False`: amounts such as hours or money; `legend_below`:
    the legend under the chart, for many segments over few bars (it would cover them)."""
    plt = _pyplot()
    n = max(1, len(labels))
    legend_rows = -(-len(segments) // LEGEND_COLUMNS) if legend_below else 0
    fig, ax = plt.subplots(figsize=(WIDTH_IN, max(2.0, 1.3 + 0.32 * n) + 0.2 * legend_rows), layout="constrained")
    y = list(range(n))[::-1][:len(labels)]
    left = [0.0] * len(labels)
    # tab10 without its green: a block's drops never look like the kept documents
    colors = [GREEN, *(c for i, c in enumerate(plt.get_cmap("tab10").colors) if i != 2)]
    for i, (name, values) in enumerate(segments.items()):
        ax.barh(y, values, left=left, color=colors[i % len(colors)], label=name)
        left = [a + b for a, b in zip(left, values, strict=True)]
    top = max(left, default=0) or 1
    for yi, total in zip(y, left, strict=True):
        ax.text(total + top * 0.01, yi, _label(total, counts), va="center", fontsize=8)
    ax.set_yticks(y, [str(label)[:48] for label in labels])
    _value_axis(ax, top, counts)
    ax.set_xlabel(unit)
    if legend_below:
        fig.legend(fontsize=7, loc="outside lower center", ncols=LEGEND_COLUMNS, frameon=False)
    else:
        ax.legend(fontsize=7, loc="lower right", frameon=False)
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    ax.spines[["top", "right"]].set_visible(False)
    return _markdown(fig, title)


@_drawn_once
def histogram(title: str, values: Sequence[float], unit: str, bins: int = 30, log: bool = True) -> str:
    """A histogram of `values` (document lengths, tokens per document), log-spaced bins by default."""
    plt = _pyplot()
    import numpy as np

    data = np.asarray([v for v in values if v is not None and v > 0], dtype=float)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 2.8), layout="constrained")
    if data.size:
        edges = (np.logspace(np.log10(data.min()), np.log10(data.max() + 1), bins) if log and data.max() > data.min()
                 else bins)
        ax.hist(data, bins=edges, color=BLUE)
        if log and data.max() > data.min():
            ax.set_xscale("log")
        ax.axvline(float(np.median(data)), color=RED, linewidth=1, label=f"median {human(float(np.median(data)))}")
        ax.legend(fontsize=8, frameon=False)
    ax.yaxis.set_major_locator(_integer_ticks())
    ax.set_xlabel(unit)
    ax.set_ylabel("documents")
    fig.suptitle(f"{title} ({human(data.size)} documents)", fontsize=10, x=0.01, ha="left")
    ax.spines[["top", "right"]].set_visible(False)
    return _markdown(fig, title)
