"""Reports of a tuning result: a markdown table and a PNG of time against accuracy loss.

One speedup is the headline: the one the decision used (the confirmation round's when there was
one, else the sweep's paired one), named after the timing objective it measures (latency,
throughput or gpuTime). Every other speedup is shown by name beside it. Ratios are computed here at
full precision and rounded once when shown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from enginewright.api.cache import CacheEntry, Outcome


def max_loss(entry: CacheEntry) -> float | None:
    return entry.max_loss


def _fmt(value, spec: str, missing: str = "—") -> str:
    return missing if value is None else format(value, spec)


def route_ms(entry: CacheEntry) -> float | None:
    """The route's one time: its geometric mean over its loads and paired rounds (entries before
    loads, and the default's own entry: the median of its rounds)."""
    return entry.paired.route_ms if entry.paired and entry.paired.route_ms else entry.median_ms


def default_ms_beside(entry: CacheEntry) -> float | None:
    """The default's time in the same rounds as the route (the route's speedup is this over
    `route_ms`)."""
    if entry.paired and entry.paired.default_ms:
        return entry.paired.default_ms
    return entry.baseline_ms


def interval_text(paired) -> str:
    return f"{1 / paired.high:.3f}–{1 / paired.low:.3f}" if paired and paired.low > 0 else "—"


def summary_rows(entries: Sequence[CacheEntry], default_id: str, winner_id: str | None) -> list[list[str]]:
    def order(e: CacheEntry):
        return (e.route_id != default_id, e.speedup is None, -(e.speedup or 0.0), e.route)

    rows = []
    for e in sorted(entries, key=order):
        mark = "default" if e.route_id == default_id else ""
        if e.route_id == winner_id:
            mark = (mark + " winner").strip()
        paired, is_default = e.paired, e.route_id == default_id
        loads = f"{paired.loads or 1}×{paired.rounds} {paired.stopped}" if paired else "—"
        m = e.measurements
        stage = f"{e.stage} (reused)" if e.reused else e.stage
        rows.append(
            [
                mark,
                e.route or "(default)",
                stage,
                e.outcome.value,
                _fmt(route_ms(e), ".4f"),
                "—" if is_default else _fmt(default_ms_beside(e), ".4f"),
                _fmt(e.speedup if not is_default else None, ".3f"),
                interval_text(paired),
                loads,
                _fmt(m.host_cpu_ms if m else None, ".4f"),
                _fmt(max_loss(e), ".3g"),
                _fmt(e.build_seconds, ".1f"),
            ]
        )
    return rows


HEADER = [
    "",
    "route",
    "stage",
    "outcome",
    "route ms",
    "default ms",
    "speedup",
    "95% interval",
    "loads×rounds",
    "host CPU ms",
    "max loss",
    "build s",
]
LEGEND = (
    "`route ms`: the route's time per call (the run's objective), its geometric mean over its loads and "
    "paired rounds; `default ms`: the default's, over its loads in the same rounds; `speedup`: default ms / "
    "route ms; `95% interval`: of that speedup, across loads and rounds; `loads×rounds`: loads of each engine, rounds, "
    "and why they stopped. The default's own row: the median of its rounds. Times of different rows come "
    "from different rounds: compare each route with the default beside it, not with another row. `host "
    "CPU ms`: the calling thread's CPU time to issue one call (near the call's time: host-bound)."
)


def measured_routes(summary: dict, entries: Sequence[CacheEntry]):
    """Every route of the target as `routes.json` publishes it (`api.contracts.MeasuredRoutes`): the
    rows of report.md's table as numbers, the default and the winner named, the headline beside."""
    from enginewright.api.contracts import MeasuredRoute, MeasuredRoutes

    default_id, winner_id = summary["default_id"], summary.get("winner_id")
    headline = summary.get("headline") or {}
    low, high = summary.get("speedup_low"), summary.get("speedup_high")
    rows = []
    for e in entries:
        is_default, paired = e.route_id == default_id, e.paired
        rows.append(
            MeasuredRoute(
                id=e.route_id,
                route=e.route,
                stage=e.stage,
                outcome=e.outcome.value,
                route_ms=route_ms(e),
                default_ms=None if is_default else default_ms_beside(e),
                speedup=None if is_default else e.speedup,
                speedup_interval=[1 / paired.high, 1 / paired.low]
                if paired and paired.low > 0 and not is_default
                else None,
                max_loss=max_loss(e),
                build_seconds=e.build_seconds,
            )
        )
    return MeasuredRoutes(
        objective=objective(summary, entries),
        metric=summary.get("metric"),
        threshold=summary.get("threshold"),
        default_id=default_id,
        winner_id=winner_id,
        headline_speedup=headline.get("speedup") if winner_id != default_id else 1.0,
        headline_interval=[low, high] if low and high and winner_id != default_id else None,
        routes=rows,
    )


def objective(summary: dict, entries: Sequence[CacheEntry]) -> str:
    return summary.get("objective") or next((e.objective for e in entries if e.objective), None) or "time"


def speedups(summary: dict, entries: Sequence[CacheEntry]) -> list[tuple[float, str, str]]:
    """(ratio, name, what it compares) for the winner, at full precision; the first is the headline,
    the one the decision used."""
    by_id: dict[str | None, CacheEntry] = {e.route_id: e for e in entries}  # (winner_id may be None)
    default, winner = by_id.get(summary["default_id"]), by_id.get(summary.get("winner_id"))
    if default is None or winner is None or not (default.median_ms and winner.median_ms):
        return []
    what = objective(summary, entries)
    if winner is default:
        return [(1.0, f"{what} speedup (headline)", "the default route is kept")]
    headline = summary.get("headline") or {}
    sweep = winner.speedup
    how = (
        f"paired rounds against the default in batch {winner.batch}, {winner.paired.loads or 1} loads × "
        f"{winner.paired.rounds} rounds, 95% {interval_text(winner.paired)}"
        if winner.paired
        else f"against the default measured in its own batch {winner.batch}"
    )
    lines = []
    if summary.get("confirmed") and headline.get("speedup"):
        low, high = summary.get("speedup_low"), summary.get("speedup_high")
        interval = f", 95% {low:.3f}–{high:.3f} across loads and rounds" if low and high else ""
        lines.append((headline["speedup"], f"{what} speedup (headline)", f"{headline.get('measured')}{interval}"))
        if sweep:
            lines.append((sweep, "sweep speedup", how))
    elif sweep:
        lines.append((sweep, f"{what} speedup (headline)", f"sweep only, unconfirmed, {how}"))
    return lines


def spent(summary: dict) -> str:
    """The line saying what the run cost: wall seconds, CPU seconds of the run and its processes, and
    the wall seconds its routes spent building (each build's own, summed: with several built at a
    time the sum passes the wall time they took) and being measured."""
    parts = [f"{summary['wall_seconds']:.1f} s wall"]
    if summary.get("cpu_seconds") is not None:
        parts.append(f"{summary['cpu_seconds']:.1f} CPU-seconds (the run and its processes)")
    at_once = summary.get("builds_at_once") or 1
    side_by_side = f" (summed over {at_once} built at a time)" if at_once > 1 else ""
    parts.append(
        f"routes: build {summary.get('build_seconds') or 0:.1f} s{side_by_side}, "
        f"measure {summary.get('measure_seconds') or 0:.1f} s"
    )
    return f"spent ({summary.get('mode') or 'tune'}): " + ", ".join(parts)


def headline(summary: dict, entries: Sequence[CacheEntry]) -> str:
    """The lines `enginewright tune` ends with: the two times the headline compares (measured in the
    same rounds: their ratio is the speedup), the headline speedup with its interval and the others
    by name, what the host has to do with it, the decision."""
    by_id: dict[str | None, CacheEntry] = {e.route_id: e for e in entries}  # (winner_id may be None)
    default, winner = by_id.get(summary["default_id"]), by_id.get(summary.get("winner_id"))
    what = objective(summary, entries)
    times = summary.get("times") or {}
    name = (winner.route if winner else "") or "(default)"
    if winner is not None and winner is not default and summary.get("winner_id") in times:
        where = "confirmation round" if summary.get("confirmed") else "the winner's paired rounds"
        lines = [
            f"{what} in the {where}: default {times[summary['default_id']]:.4f} ms, winner {name} "
            f"{times[summary['winner_id']]:.4f} ms"
        ]
    elif winner is not None and winner is not default and winner.paired and winner.paired.default_ms:
        lines = [
            f"{what} in the winner's paired rounds: default {winner.paired.default_ms:.4f} ms, winner {name} "
            f"{route_ms(winner):.4f} ms"
        ]
    elif winner is None or winner is default:
        lines = [
            f"default route {_fmt(default.median_ms if default else None, '.4f')} ms ({what}); kept: no route beat it"
        ]
    else:
        lines = [
            f"default route {_fmt(default.median_ms if default else None, '.4f')} ms, winner {name} "
            f"{_fmt(winner.median_ms, '.4f')} ms ({what}, medians of rounds at different moments: the "
            f"speedup below compares each with the default beside it)"
        ]
    lines += [f"{label} {ratio:.3f}x: {detail}" for ratio, label, detail in speedups(summary, entries)]
    host = (summary.get("headline") or {}).get("host")
    if host:
        lines.append(f"host: {host}")
    built = build_choices(winner, default)
    if built:
        lines.append(f"builds: {built}")
    lines.append(f"decision: {summary.get('decision', '')}")
    return "\n".join(lines)


def build_choices(winner: CacheEntry | None, default: CacheEntry | None) -> str | None:
    """What the winner's and the default's builds autotuned, where either did: Inductor times a
    kernel's few configs (or descends through them) while building and the engine keeps its choice, so
    a build is one draw (`TunedAtBuild`). None where neither build kept an autotuned config or the
    backend does not say."""
    from enginewright.api.contracts import TunedAtBuild

    named = ([(winner, "winner")] if winner is not default else []) + [(default, "default")]
    tuned = [(name, TunedAtBuild.of(entry)) for entry, name in named if entry is not None]
    parts = [f"{name} {t.brief()}" for name, t in tuned if t is not None and t.kernels]
    if not parts:
        return None
    return (
        "kernel configs autotuned while building: " + ", ".join(parts) + "; the published engine is the "
        "winner's as measured, and a rebuild of a route autotunes again and need not run alike"
    )


def other_measurements(entries: Sequence[CacheEntry]) -> list[list[str]]:
    """Latency, throughput and device time of each route, one round each, measured at other moments
    than the paired rounds: for what each objective would see, not for comparing routes."""
    rows = []
    for e in entries:
        m = e.measurements
        if m:
            rows.append(
                [
                    e.route or "(default)",
                    f"{m.latency_ms:.4f}",
                    f"{m.throughput_per_second:.1f}",
                    f"{m.gpu_time_ms:.4f}",
                    _fmt(m.host_cpu_ms, ".4f"),
                ]
            )
    return rows


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]


def markdown(summary: dict, entries: Sequence[CacheEntry]) -> str:
    rows = summary_rows(entries, summary["default_id"], summary.get("winner_id"))
    lines = [f"# Tuning report: {summary.get('model', '')}", ""]
    for key in ("backend", "mode", "metric", "threshold", "noise_margin", "decision"):
        if summary.get(key) is not None:
            lines.append(f"- **{key.replace('_', ' ')}**: {summary[key]}")
    lines += [f"- **{name} {ratio:.3f}×**: {detail}" for ratio, name, detail in speedups(summary, entries)]
    host = (summary.get("headline") or {}).get("host")
    if host:
        lines.append(f"- **host**: {host}")
    by_id: dict[str | None, CacheEntry] = {e.route_id: e for e in entries}
    built = build_choices(by_id.get(summary.get("winner_id")), by_id.get(summary["default_id"]))
    if built:
        lines.append(f"- **builds**: {built}")
    if summary.get("confirmation"):
        routes = {e.route_id: e.route or "(default)" for e in entries}
        lines.append(
            "- **confirmation ratios** (candidate/default, geometric mean): "
            + ", ".join(f"`{routes.get(k, k)}` {v:.3f}" for k, v in summary["confirmation"].items())
        )
    for key in ("build_seconds", "builds_at_once", "measure_seconds", "wall_seconds", "cpu_seconds"):
        if summary.get(key) is not None:
            lines.append(f"- **{key.replace('_', ' ')}**: {summary[key]}")
    if summary.get("reused"):
        routes = {e.route_id: e.route or "(default)" for e in entries}
        lines += [
            "",
            "## Reused from earlier runs",
            "",
            "Entries of earlier runs with this run's fingerprint (`api.fingerprint`): not built or timed "
            "again. The default was measured fresh; a reused route can win only through this run's "
            "confirmation round against it.",
            "",
        ]
        lines += _table(["route", "from"], [[routes.get(k, k), v] for k, v in summary["reused"].items()])
    if summary.get("routes"):
        lines += ["", "## Routes by outcome", ""]
        lines += _table(["outcome", "routes"], [[k, v] for k, v in summary["routes"].items()])
    if summary.get("versions"):
        lines += ["", "## Versions", ""]
        lines += _table(["component", "version"], [[k, v] for k, v in summary["versions"].items()])
    lines += ["", "## Routes", "", LEGEND, ""]
    lines += _table(HEADER, rows)
    others = other_measurements(entries)
    if others:
        lines += ["", "## Other measurements (one round each, at other moments: not for comparing routes)", ""]
        lines += _table(["route", "latency ms", "throughput /s", "gpuTime ms", "host CPU ms"], others)
    return "\n".join(lines) + "\n"


def table(summary: dict, entries: Sequence[CacheEntry]) -> str:
    """The summary table for a terminal."""
    rows = [HEADER] + summary_rows(entries, summary["default_id"], summary.get("winner_id"))
    widths = [min(60, max(len(r[i]) for r in rows)) for i in range(len(HEADER))]
    return "\n".join("  ".join(cell[:60].ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def _short(route: str, width: int = 38) -> str:
    route = route or "(default)"
    return route if len(route) <= width else route[: width - 1] + "…"


def prepare_figure() -> None:
    """Import what `figure` draws with (matplotlib, 0.7-1.2 s on 2 cores), ahead of it: `tune` does
    so while its first routes build (`Worker(beside_first_build=...)`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401


def figure(summary: dict, entries: Sequence[CacheEntry], labelled: int = 3):
    """Each measured route's speedup over the default it was timed beside (with its 95% interval
    across loads and rounds) against its accuracy loss: default (at 1) and winner marked, the default, the
    winner and the `labelled` fastest passing routes labelled with their routes, the threshold
    drawn. Speedups, not absolute times: each route's time comes from its own rounds, and only its
    ratio to the default beside it agrees with the headline. A loss of 0 (or not checked) cannot sit
    on a log axis: such routes are drawn below the smallest positive loss, with their own marker."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    default_id, winner_id = summary["default_id"], summary.get("winner_id")
    measured = [
        e
        for e in entries
        if e.timing and e.outcome in (Outcome.ok, Outcome.accuracy_rejected) and (e.route_id == default_id or e.speedup)
    ]
    positive = [loss for e in measured if (loss := max_loss(e)) is not None and loss > 0.0]
    floor = min(positive) / 10 if positive else 1e-12
    # The winner sits at the headline speedup, with the headline's interval: the figure says what the
    # headline says (the sweep's figure for it is in the report's table).
    headline_speedup = (summary.get("headline") or {}).get("speedup") if winner_id != default_id else None

    def x(e: CacheEntry) -> float:
        if e.route_id == default_id:
            return 1.0
        if e.route_id == winner_id and headline_speedup:
            return headline_speedup
        assert e.speedup is not None  # `measured` holds only the default and routes with a speedup
        return e.speedup

    def interval(e: CacheEntry) -> tuple[float, float] | None:
        if e.route_id == winner_id and headline_speedup:
            low, high = summary.get("speedup_low"), summary.get("speedup_high")
            return (low, high) if low and high else None
        if e.paired and e.paired.low > 0 and e.route_id != default_id:
            return 1 / e.paired.high, 1 / e.paired.low
        return None

    def y(e: CacheEntry) -> float:
        loss = max_loss(e)
        return loss if loss and loss > 0 else floor

    fig, ax = plt.subplots(figsize=(8.5, 5.2), dpi=110)
    for outcome, colour, label in (
        (Outcome.ok, "tab:blue", "passed"),
        (Outcome.accuracy_rejected, "tab:red", "rejected by accuracy"),
    ):
        group = [e for e in measured if e.outcome is outcome]
        for e in group:
            bounds = interval(e)
            if bounds:
                ax.errorbar(
                    [x(e)],
                    [y(e)],
                    xerr=[[max(0.0, x(e) - bounds[0])], [max(0.0, bounds[1] - x(e))]],
                    fmt="none",
                    ecolor=colour,
                    alpha=0.5,
                    linewidth=1,
                )
        shown = [e for e in group if (max_loss(e) or 0.0) > 0.0]
        zero = [e for e in group if e not in shown]
        if shown:
            ax.scatter([x(e) for e in shown], [y(e) for e in shown], s=28, c=colour, alpha=0.8, label=label)
        if zero:
            ax.scatter(
                [x(e) for e in zero],
                [floor] * len(zero),
                s=40,
                marker="v",
                facecolors="none",
                edgecolors=colour,
                label=f"{label}, loss 0 or not checked (drawn at {floor:.0e})",
            )
    by_id: dict[str | None, CacheEntry] = {e.route_id: e for e in measured}  # (winner_id may be None)
    default, winner = by_id.get(default_id), by_id.get(summary.get("winner_id"))
    if default:
        ax.scatter(
            [1.0],
            [y(default)],
            s=200,
            marker="s",
            facecolors="none",
            edgecolors="black",
            linewidths=2,
            zorder=5,
            label="default = winner" if winner is default else "default",
        )
    if winner and winner is not default:
        ax.scatter(
            [x(winner)],
            [y(winner)],
            s=120,
            marker="*",
            facecolors="gold",
            edgecolors="black",
            zorder=6,
            label=f"winner: headline {x(winner):.3f}x",
        )
    ax.axvline(1.0, color="0.5", linewidth=0.8)
    fastest = sorted((e for e in measured if e.passed), key=lambda e: -x(e))[:labelled]
    to_label = list({e.route_id: e for e in [e for e in (default, winner) if e] + fastest}.values())
    labels = [
        ax.annotate(
            _short(e.route),
            (x(e), y(e)),
            xytext=(8, 8),
            textcoords="offset points",
            fontsize=7,
            arrowprops={"arrowstyle": "-", "color": "0.6", "linewidth": 0.6},
        )
        for e in to_label
    ]
    if summary.get("threshold"):
        ax.axhline(
            summary["threshold"],
            color="tab:red",
            linestyle="--",
            linewidth=1,
            label=f"threshold {summary['threshold']:g}",
        )
    ax.set_yscale("log")
    ax.set_xlabel(
        f"speedup over the default timed beside it ({objective(summary, entries)}; bars: 95% across loads and rounds)"
    )
    ax.set_ylabel(f"max accuracy loss ({summary.get('metric', '')}, log scale)")
    ax.set_title(f"{summary.get('model', '')} — {summary.get('backend', '')} {summary.get('mode', '')}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    _spread_labels(fig, labels)
    return fig


def _spread_labels(fig, labels) -> None:
    """Move labels up, one line at a time, until none overlaps another (routes close in speedup and
    loss would otherwise print over each other)."""
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox

    renderer = fig.canvas.get_renderer()

    def box(label):  # the text alone, not its leader line
        label.update_positions(renderer)
        return Text.get_window_extent(label, renderer)

    placed: list[Bbox] = []
    for label in labels:
        dx, dy = label.xyann
        for _ in range(60):
            if not any(box(label).expanded(1.02, 1.15).overlaps(other) for other in placed):
                break
            dy += 9
            label.xyann = (dx, dy)
        placed.append(box(label))


def plot(summary: dict, entries: Sequence[CacheEntry], path: Path) -> Path:
    """Write `figure` as a PNG."""
    import matplotlib.pyplot as plt

    fig = figure(summary, entries)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def load_entries(directory: Path) -> list[CacheEntry]:
    """Every cache entry under `directory` (a local `tune --out` dir or a downloaded cache)."""
    return [CacheEntry.from_json(p.read_bytes()) for p in sorted(directory.rglob("entries/*.json"))]


def render(
    directory: Path, summary: dict | None = None, entries: Sequence[CacheEntry] | None = None
) -> tuple[Path, Path]:
    """(Re)write report.md and report.png in `directory` from `entries` (default: the cache entries
    found under `directory`)."""
    from enginewright.api.models import Search, default_of
    from enginewright.api.routes import route_id
    from enginewright.search.flow import sweep_decision

    entries = list(entries) if entries is not None else load_entries(directory)
    if not entries:
        raise FileNotFoundError(f"no cache entries (entries/*.json) under {directory}")
    summary_path = directory / "summary.json"
    if summary is None:
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    if "default_id" not in summary:
        # No decision recorded (a bare cache directory): the flow's rule for the sweep alone, at the
        # recorded noise margin where there is one, else the TuningRun's default.
        summary["default_id"] = route_id("")
        floor = summary.get("noise_margin") or default_of(Search, "noise_margin")
        try:
            summary["winner_id"] = sweep_decision(entries, summary["default_id"], floor).winner_id
        except ValueError:
            summary["winner_id"] = None
    md = directory / "report.md"
    md.write_text(markdown(summary, entries))
    png = plot(summary, entries, directory / "report.png")
    return md, png
