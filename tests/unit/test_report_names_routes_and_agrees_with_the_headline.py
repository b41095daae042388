"""report.md names routes, never route ids (hashes); report.png draws the winner at the headline's
speedup with the headline's interval, and no two route labels overlap, even for routes whose
speedups and losses are all but equal."""

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from enginewright.api.cache import CacheEntry, Outcome, Paired, TimingStats, Versions  # noqa: E402
from enginewright.api.routes import Route, route_id  # noqa: E402
from enginewright.report import figure, markdown  # noqa: E402

DEFAULT_ID = route_id("")


def entry(knobs, ratio, loss=1e-6):
    route = Route.of(knobs)
    paired = (
        None
        if not knobs
        else Paired(
            ratio=ratio, low=ratio * 0.98, high=ratio * 1.02, rounds=6, stopped="faster", route_ms=ratio, default_ms=1.0
        )
    )
    return CacheEntry(
        target="local",
        route_id=route.id,
        route=route.canonical,
        knobs=knobs,
        stage="stage1",
        batch="stage1-b000",
        outcome=Outcome.ok,
        loss={"out": loss},
        baseline_ms=1.0,
        paired=paired,
        timing=TimingStats(median_ms=ratio, mean_ms=ratio, p90_ms=ratio, min_ms=ratio, n=5),
        versions=Versions(compiler="onnxruntime-1.20.1"),
    )


# Six routes within 0.5% of each other and of one loss: labels drawn where their points are overlap.
ENTRIES = [entry({}, 1.0)] + [
    entry({"knob_with_a_long_name": str(i), "other": "x"}, 0.80 + 0.001 * i) for i in range(6)
]
WINNER = ENTRIES[1]
SUMMARY = {
    "model": "m.onnx",
    "backend": "onnxruntime",
    "mode": "fast",
    "metric": "cosine",
    "threshold": 1e-3,
    "default_id": DEFAULT_ID,
    "winner_id": WINNER.route_id,
    "confirmed": True,
    "confirmation": {WINNER.route_id: 0.78, ENTRIES[2].route_id: 0.79},
    "speedup_low": 1.2,
    "speedup_high": 1.36,
    "times": {DEFAULT_ID: 1.0, WINNER.route_id: 0.78},
    "headline": {"name": "gpuTime speedup", "speedup": 1 / 0.78, "measured": "confirmation round"},
    "decision": "route wins",
}


def test_markdown_names_the_confirmation_candidates_by_route():
    md = markdown(SUMMARY, ENTRIES)
    line = next(line for line in md.splitlines() if "confirmation ratios" in line)
    assert f"`{WINNER.route}` 0.780" in line and f"`{ENTRIES[2].route}` 0.790" in line
    assert not re.search(r"\b[0-9a-f]{12}\b", md), "a route id in report.md"


def test_the_winner_is_drawn_at_the_headline_and_labels_do_not_overlap():
    fig = figure(SUMMARY, ENTRIES, labelled=6)
    try:
        ax = fig.axes[0]
        renderer = fig.canvas.get_renderer()
        labels = [t for t in ax.texts if t.get_text()]
        assert len(labels) == 7  # the default, the winner and the five others
        fig.canvas.draw()
        boxes = [Text.get_window_extent(t, renderer) for t in labels]  # the text, not its leader line
        overlapping = [
            (a.get_text(), b.get_text())
            for i, a in enumerate(labels)
            for j, b in enumerate(labels)
            if i < j and boxes[i].overlaps(boxes[j])
        ]
        assert not overlapping
        winner_label = next(t for t in labels if t.get_text() == WINNER.route)
        assert abs(winner_label.xy[0] - 1 / 0.78) < 1e-9  # the headline, not the sweep's 1.25
        star = next(c for c in ax.collections if c.get_label().startswith("winner: headline 1.282x"))
        assert abs(star.get_offsets()[0][0] - 1 / 0.78) < 1e-9
        # The winner's bar spans the headline's interval.
        spans = [seg for coll in ax.collections for seg in getattr(coll, "get_segments", lambda: [])()]
        assert any(abs(seg[0][0] - 1.2) < 1e-9 and abs(seg[1][0] - 1.36) < 1e-9 for seg in spans)
    finally:
        plt.close(fig)
