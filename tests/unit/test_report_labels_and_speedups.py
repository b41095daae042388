"""Reports: one headline speedup, named after the timing objective and the measurement it comes from,
the others by name; every speedup is computed from the measured times and rounded once when shown; report.md has tables, not Python dicts; report.png labels routes, does not pin
tiny losses to a floor, and keeps the default's marker visible under the winner's."""

from enginewright.api.cache import CacheEntry, Measurements, Outcome, Paired, TimingStats, Versions
from enginewright.api.routes import Route, route_id
from enginewright.report import HEADER, figure, headline, markdown, summary_rows

DEFAULT_ID = route_id("")


def entry(knobs, median, baseline, batch, loss=0.0, outcome=Outcome.ok):
    route = Route.of(knobs)
    return CacheEntry(
        target="local",
        route_id=route.id,
        route=route.canonical,
        knobs=knobs,
        stage="stage1",
        batch=batch,
        outcome=outcome,
        baseline_ms=baseline,
        loss={"out": loss},
        timing=TimingStats(median_ms=median, mean_ms=median, p90_ms=median, min_ms=median, n=5),
        versions=Versions(compiler="onnxruntime-1.20.1", gpu_name="cpu-x86_64"),
    )


# The run: default 11.8446 ms in batch b000, the winner 11.4098 ms in batch b001 whose own
# default measured 11.9345 ms.
ENTRIES = [
    entry({}, 11.8446, 11.8446, "stage1-b000"),
    entry({"enable_mem_pattern": "0"}, 11.4098, 11.9345, "stage1-b001", loss=1e-15),
    entry({"execution_mode": "parallel"}, 12.5, 11.8446, "stage1-b000", loss=2e-3, outcome=Outcome.accuracy_rejected),
]
WINNER = ENTRIES[1].route_id
SUMMARY = {
    "model": "mlp.onnx",
    "backend": "onnxruntime",
    "mode": "fast",
    "metric": "cosine",
    "threshold": 1e-4,
    "default_id": DEFAULT_ID,
    "winner_id": WINNER,
    "speedup": round(11.9345 / 11.4098, 4),
    "decision": "route -enable_mem_pattern=0 is faster than the default beyond the 3.0% noise margin",
    "routes": {"ok": 2, "accuracy-rejected": 1, "crash": 0},
    "versions": {"compiler": "onnxruntime-1.20.1", "gpuName": "cpu-x86_64"},
}


def paired(knobs, ratio, batch, rounds=6, low=None, high=None):
    e = entry(knobs, 11.0 * ratio, 11.0, batch)
    return e.model_copy(
        update={
            "objective": "latency",
            "paired": Paired(
                ratio=ratio, low=low or ratio * 0.99, high=high or ratio * 1.01, rounds=rounds, stopped="faster"
            ),
            "measurements": Measurements(latency_ms=11.0 * ratio, throughput_ms=10.0 * ratio, gpu_time_ms=9.0 * ratio),
        }
    )


def test_one_headline_speedup_named_after_the_objective_and_the_sweep_by_name():
    entries = [
        entry({}, 11.0, 11.0, "stage1-b000").model_copy(
            update={
                "objective": "latency",
                "measurements": Measurements(latency_ms=11.0, throughput_ms=10.0, gpu_time_ms=9.0),
            }
        ),
        paired({"enable_mem_pattern": "0"}, 0.8, "stage1-b001"),
    ]
    winner = entries[1].route_id
    summary = {
        **SUMMARY,
        "winner_id": winner,
        "objective": "latency",
        "confirmed": True,
        "confirmation": {winner: 0.78},
        "confirm_rounds": 5,
        "speedup_low": 1.2,
        "speedup_high": 1.36,
        "times": {DEFAULT_ID: 10.0, winner: 7.8},
        "headline": {
            "name": "latency speedup",
            "speedup": 1 / 0.78,
            "measured": "confirmation round: 5 interleaved rounds of 5 loads each against the default",
        },
    }
    lines = headline(summary, entries).splitlines()
    headlines = [line for line in lines if "(headline)" in line]
    assert headlines == [
        "latency speedup (headline) 1.282x: confirmation round: 5 interleaved rounds of 5 loads each "
        "against the default, 95% 1.200–1.360 across loads and rounds"
    ]
    # the two times the headline compares come from the same rounds: their ratio is the headline
    assert lines[0] == "latency in the confirmation round: default 10.0000 ms, winner -enable_mem_pattern=0 7.8000 ms"
    assert (
        "sweep speedup 1.250x: paired rounds against the default in batch stage1-b001, 1 loads × 6 rounds, "
        "95% 1.238–1.263" in lines
    )
    assert not any("all three measurements" in line for line in lines)  # one time per engine


def test_without_a_confirmation_the_sweep_is_the_headline():
    entries = [entry({}, 11.0, 11.0, "b0"), paired({"enable_mem_pattern": "0"}, 0.9, "b1")]
    summary = {**SUMMARY, "winner_id": entries[1].route_id, "objective": "gpuTime"}
    text = headline(summary, entries)
    assert (
        "gpuTime speedup (headline) 1.111x: sweep only, unconfirmed, paired rounds against the default in batch b1, "
        "1 loads × 6 rounds, 95% 1.100–1.122" in text
    )
    assert text.count("(headline)") == 1


def test_a_speedup_is_rounded_once():
    # 1.000504999 rounds to 1.001; rounded to 4 places first (1.0005) it would show 1.000.
    entries = [entry({}, 1.0, 1.0, "b0"), entry({"enable_mem_pattern": "0"}, 1.0, 1.000504999, "b1")]
    summary = {**SUMMARY, "winner_id": entries[1].route_id, "speedup": round(1.000504999, 4)}
    assert (
        "speedup (headline) 1.001x: sweep only, unconfirmed, against the default measured in its own batch b1"
        in headline(summary, entries)
    )


def test_table_columns_show_the_paired_speedup_its_interval_and_rounds():
    entries = [entry({}, 11.0, 11.0, "b0"), paired({"enable_mem_pattern": "0"}, 0.8, "b1", low=0.78, high=0.82)]
    rows = {row[1]: dict(zip(HEADER, row)) for row in summary_rows(entries, DEFAULT_ID, entries[1].route_id)}
    winner = rows["-enable_mem_pattern=0"]
    assert winner["speedup"] == "1.250" and winner["95% interval"] == "1.220–1.282"
    assert (
        winner["loads×rounds"] == "1×6 faster" and winner["route ms"] == "8.8000" and winner["default ms"] == "11.0000"
    )
    assert rows["(default)"]["speedup"] == "—" and rows["(default)"]["default ms"] == "—"


def test_markdown_has_tables_for_versions_and_counts_not_dicts():
    md = markdown(SUMMARY, ENTRIES)
    assert "{" not in md and "}" not in md
    assert "| compiler | onnxruntime-1.20.1 |" in md and "| gpuName | cpu-x86_64 |" in md
    assert "| ok | 2 |" in md and "| accuracy-rejected | 1 |" in md
    assert (
        "**time speedup (headline) 1.046×**: sweep only, unconfirmed, against the default measured in its own batch"
        in md
    )


def test_plot_labels_routes_keeps_tiny_losses_and_shows_both_markers():
    import matplotlib.pyplot as plt

    fig = figure(SUMMARY, ENTRIES)
    try:
        ax = fig.axes[0]
        labels = [t.get_text() for t in ax.texts]
        assert "(default)" in labels and "-enable_mem_pattern=0" in labels
        # The winner's loss of 1e-15 is drawn at 1e-15, not pinned to 1e-12.
        ys = {y for coll in ax.collections for _, y in coll.get_offsets()}
        assert 1e-15 in ys
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "default" in legend and any(t.startswith("winner: headline") for t in legend)
        assert any("loss 0 or not checked (drawn at 1e-16)" in t for t in legend)  # the default's loss is 0
        default_marker = next(
            c for c, t in zip(ax.collections, [h.get_label() for h in ax.collections]) if t == "default"
        )
        assert default_marker.get_facecolors().size == 0 or default_marker.get_facecolors()[0][3] == 0  # hollow
    finally:
        plt.close(fig)
