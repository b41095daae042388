"""Reports: every speedup is computed from the measured times, rounded once when shown, and says
what it compares; report.md has tables, not Python dicts; report.png labels routes, does not pin
tiny losses to a floor, and keeps the default's marker visible under the winner's."""

from enginewright.api.cache import CacheEntry, Outcome, TimingStats, Versions
from enginewright.report import figure, headline, markdown, summary_rows, HEADER
from enginewright.search.routes import Route, route_id

DEFAULT_ID = route_id("")


def entry(knobs, median, baseline, batch, loss=0.0, outcome=Outcome.ok):
    route = Route.of(knobs)
    return CacheEntry(target="local", route_id=route.id, route=route.canonical, knobs=knobs, stage="stage1",
                      batch=batch, outcome=outcome, baseline_ms=baseline, loss={"out": loss},
                      timing=TimingStats(median_ms=median, mean_ms=median, p90_ms=median, min_ms=median, n=5),
                      versions=Versions(compiler="onnxruntime-1.20.1", gpu_name="cpu-x86_64"))


# The run: default 11.8446 ms in batch b000, the winner 11.4098 ms in batch b001 whose own
# default measured 11.9345 ms.
ENTRIES = [entry({}, 11.8446, 11.8446, "stage1-b000"),
           entry({"enable_mem_pattern": "0"}, 11.4098, 11.9345, "stage1-b001", loss=1e-15),
           entry({"execution_mode": "parallel"}, 12.5, 11.8446, "stage1-b000", loss=2e-3,
                 outcome=Outcome.accuracy_rejected)]
WINNER = ENTRIES[1].route_id
SUMMARY = {"model": "mlp.onnx", "backend": "onnxruntime", "mode": "fast", "metric": "cosine", "threshold": 1e-4,
           "default_id": DEFAULT_ID, "winner_id": WINNER, "speedup": round(11.9345 / 11.4098, 4),
           "decision": "route -enable_mem_pattern=0 is faster than the default beyond the 3.0% noise margin",
           "routes": {"ok": 2, "accuracy-rejected": 1, "crash": 0},
           "versions": {"compiler": "onnxruntime-1.20.1", "gpuName": "cpu-x86_64"}}


def test_each_speedup_says_what_it_compares():
    text = headline(SUMMARY, ENTRIES)
    assert "speedup 1.038x: winner vs the run's default entry: 11.8446 / 11.4098 ms" in text
    assert "speedup 1.046x: winner vs the default measured in its own batch stage1-b001: 11.9345 / 11.4098 ms; " \
           "the sweep's decision" in text


def test_a_speedup_is_rounded_once():
    # 1.000504999 rounds to 1.001; rounded to 4 places first (1.0005) it would show 1.000.
    entries = [entry({}, 1.0, 1.0, "b0"), entry({"enable_mem_pattern": "0"}, 1.0, 1.000504999, "b1")]
    summary = {**SUMMARY, "winner_id": entries[1].route_id, "speedup": round(1.000504999, 4)}
    assert "speedup 1.001x: winner vs the default measured in its own batch" in headline(summary, entries)


def test_confirmation_ratio_is_labelled_as_the_decision():
    summary = {**SUMMARY, "confirmation": {WINNER: 0.95}}
    text = headline(summary, ENTRIES)
    assert "speedup 1.053x: confirmation rounds: geometric mean of the paired default/winner ratios; the decision" in text
    assert "the sweep's decision" not in text


def test_table_columns_name_their_baselines():
    rows = {row[1]: dict(zip(HEADER, row)) for row in summary_rows(ENTRIES, DEFAULT_ID, WINNER)}
    winner = rows["-enable_mem_pattern=0"]
    assert winner["× own batch's default"] == "1.046" and winner["× run's default"] == "1.038"
    assert winner["batch"] == "stage1-b001"


def test_markdown_has_tables_for_versions_and_counts_not_dicts():
    md = markdown(SUMMARY, ENTRIES)
    assert "{" not in md and "}" not in md
    assert "| compiler | onnxruntime-1.20.1 |" in md and "| gpuName | cpu-x86_64 |" in md
    assert "| ok | 2 |" in md and "| accuracy-rejected | 1 |" in md
    assert "**speedup 1.038×**: winner vs the run's default entry" in md


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
        assert "default" in legend and "winner" in legend
        assert any("loss 0 or not checked (drawn at 1e-16)" in t for t in legend)  # the default's loss is 0
        default_marker = next(c for c, t in zip(ax.collections, [h.get_label() for h in ax.collections])
                              if t == "default")
        assert default_marker.get_facecolors().size == 0 or default_marker.get_facecolors()[0][3] == 0  # hollow
    finally:
        plt.close(fig)
