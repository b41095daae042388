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
    return max(entry.loss.values()) if entry.loss else None


def _fmt(value, spec: str, missing: str = "—") -> str:
    return missing if value is None else format(value, spec)


def summary_rows(entries: Sequence[CacheEntry], default_id: str, winner_id: str | None) -> list[list[str]]:
    def order(e: CacheEntry):
        return (e.route_id != default_id, e.speedup is None, -(e.speedup or 0.0), e.route)
    rows = []
    for e in sorted(entries, key=order):
        mark = "default" if e.route_id == default_id else ""
        if e.route_id == winner_id:
            mark = (mark + " winner").strip()
        paired = e.paired
        m = e.measurements
        rows.append([mark, e.route or "(default)", e.stage, e.batch or "—", e.outcome.value, _fmt(e.median_ms, ".4f"),
                     _fmt(e.speedup if e.route_id != default_id else None, ".3f"),
                     f"{1 / paired.high:.3f}–{1 / paired.low:.3f}" if paired else "—",
                     f"{paired.rounds} {paired.stopped}" if paired else "—",
                     _fmt(m.latency_ms if m else None, ".4f"), _fmt(m.throughput_per_second if m else None, ".1f"),
                     _fmt(m.gpu_time_ms if m else None, ".4f"), _fmt(max_loss(e), ".3g"), _fmt(e.build_seconds, ".1f")])
    return rows


HEADER = ["", "route", "stage", "batch", "outcome", "objective ms", "sweep speedup", "95% interval", "rounds",
          "latency ms", "throughput /s", "gpuTime ms", "max loss", "build s"]
LEGEND = ("`objective ms`: the route's median per-call time over its rounds, timed as the run's objective says; "
          "`sweep speedup`: default/route, geometric mean of the per-round ratios over paired rounds that "
          "timed the route and the default of its batch one after the other (routes without paired rounds: "
          "its batch's default median / its median); `95% interval`: of that speedup; `rounds`: how many "
          "paired rounds and why they stopped; latency, throughput and gpuTime: one round each of the "
          "three measurements.")


def objective(summary: dict, entries: Sequence[CacheEntry]) -> str:
    return summary.get("objective") or next((e.objective for e in entries if e.objective), None) or "time"


def speedups(summary: dict, entries: Sequence[CacheEntry]) -> list[tuple[float, str, str]]:
    """(ratio, name, what it compares) for the winner, at full precision; the first is the headline,
    the one the decision used."""
    by_id = {e.route_id: e for e in entries}
    default, winner = by_id.get(summary["default_id"]), by_id.get(summary.get("winner_id"))
    if default is None or winner is None or not (default.median_ms and winner.median_ms):
        return []
    what = objective(summary, entries)
    if winner is default:
        return [(1.0, f"{what} speedup (headline)", "the default route is kept")]
    ratios = summary.get("confirmation") or {}
    sweep = winner.speedup
    how = (f"paired rounds against the default in batch {winner.batch}, {winner.paired.rounds} rounds"
           if winner.paired else f"against the default measured in its own batch {winner.batch}")
    lines = []
    if winner.route_id in ratios:
        rounds = summary.get("confirm_rounds")
        lines.append((1.0 / ratios[winner.route_id], f"{what} speedup (headline)",
                      "confirmation round, geometric mean of the per-round default/winner ratios"
                      + (f" over {rounds} interleaved rounds" if rounds else "")))
        if sweep:
            lines.append((sweep, "sweep speedup", how))
    elif sweep:
        lines.append((sweep, f"{what} speedup (headline)", f"sweep only, unconfirmed, {how}"))
    return lines


def headline(summary: dict, entries: Sequence[CacheEntry]) -> str:
    """The lines `enginewright tune` ends with: times, the headline speedup and the others by name,
    the decision."""
    by_id = {e.route_id: e for e in entries}
    default, winner = by_id.get(summary["default_id"]), by_id.get(summary.get("winner_id"))
    what = objective(summary, entries)
    lines = [f"default route {_fmt(default.median_ms if default else None, '.4f')} ms ({what}); winner "
             f"{(winner.route if winner else '') or '(default)'} {_fmt(winner.median_ms if winner else None, '.4f')} ms"]
    lines += [f"{name} {ratio:.3f}x: {detail}" for ratio, name, detail in speedups(summary, entries)]
    if winner and winner.measurements and default and default.measurements and winner is not default:
        w, d = winner.measurements, default.measurements
        lines.append(f"all three measurements, default -> winner (one round each): latency {d.latency_ms:.4f} -> "
                     f"{w.latency_ms:.4f} ms, throughput {d.throughput_per_second:.1f} -> {w.throughput_per_second:.1f}/s, "
                     f"gpuTime {d.gpu_time_ms:.4f} -> {w.gpu_time_ms:.4f} ms")
    lines.append(f"decision: {summary.get('decision', '')}")
    return "\n".join(lines)


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
    if summary.get("confirmation"):
        lines.append("- **confirmation ratios** (candidate/default, geometric mean): "
                     + ", ".join(f"`{k}` {v:.3f}" for k, v in summary["confirmation"].items()))
    for key in ("build_seconds", "measure_seconds", "wall_seconds"):
        if summary.get(key) is not None:
            lines.append(f"- **{key.replace('_', ' ')}**: {summary[key]}")
    if summary.get("routes"):
        lines += ["", "## Routes by outcome", ""]
        lines += _table(["outcome", "routes"], [[k, v] for k, v in summary["routes"].items()])
    if summary.get("versions"):
        lines += ["", "## Versions", ""]
        lines += _table(["component", "version"], [[k, v] for k, v in summary["versions"].items()])
    lines += ["", "## Routes", "", LEGEND, ""]
    lines += _table(HEADER, rows)
    return "\n".join(lines) + "\n"


def table(summary: dict, entries: Sequence[CacheEntry]) -> str:
    """The summary table for a terminal."""
    rows = [HEADER] + summary_rows(entries, summary["default_id"], summary.get("winner_id"))
    widths = [min(60, max(len(r[i]) for r in rows)) for i in range(len(HEADER))]
    return "\n".join("  ".join(cell[:60].ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def _short(route: str, width: int = 38) -> str:
    route = route or "(default)"
    return route if len(route) <= width else route[:width - 1] + "…"


def figure(summary: dict, entries: Sequence[CacheEntry], labelled: int = 3):
    """GPU time against accuracy loss for every measured route: default and winner marked (the
    winner's star drawn inside the default's hollow square, so neither hides the other), the
    default, the winner and the `labelled` fastest passing routes labelled with their routes, the
    threshold drawn. A loss of 0 (or not checked) cannot sit on a log axis: such routes are drawn
    below the smallest positive loss, with their own marker, and the legend says so."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = [e for e in entries if e.timing and e.outcome in (Outcome.ok, Outcome.accuracy_rejected)]
    positive = [max_loss(e) for e in measured if (max_loss(e) or 0.0) > 0.0]
    floor = min(positive) / 10 if positive else 1e-12

    def y(e: CacheEntry) -> float:
        loss = max_loss(e)
        return loss if loss and loss > 0 else floor

    fig, ax = plt.subplots(figsize=(8.5, 5.2), dpi=110)
    for outcome, colour, label in ((Outcome.ok, "tab:blue", "passed"),
                                   (Outcome.accuracy_rejected, "tab:red", "rejected by accuracy")):
        group = [e for e in measured if e.outcome is outcome]
        shown = [e for e in group if (max_loss(e) or 0.0) > 0.0]
        zero = [e for e in group if e not in shown]
        if shown:
            ax.scatter([e.median_ms for e in shown], [y(e) for e in shown], s=28, c=colour, alpha=0.8, label=label)
        if zero:
            ax.scatter([e.median_ms for e in zero], [floor] * len(zero), s=40, marker="v", facecolors="none",
                       edgecolors=colour, label=f"{label}, loss 0 or not checked (drawn at {floor:.0e})")
    by_id = {e.route_id: e for e in measured}
    default, winner = by_id.get(summary["default_id"]), by_id.get(summary.get("winner_id"))
    if default:
        ax.scatter([default.median_ms], [y(default)], s=200, marker="s", facecolors="none", edgecolors="black",
                   linewidths=2, zorder=5, label="default = winner" if winner is default else "default")
    if winner and winner is not default:
        ax.scatter([winner.median_ms], [y(winner)], s=120, marker="*", facecolors="gold", edgecolors="black",
                   zorder=6, label="winner")
    fastest = sorted((e for e in measured if e.passed), key=lambda e: e.median_ms)[:labelled]
    to_label = list({e.route_id: e for e in [e for e in (default, winner) if e] + fastest}.values())
    for i, e in enumerate(to_label):
        ax.annotate(_short(e.route), (e.median_ms, y(e)), xytext=(8, 10 + 11 * (i % 3)), textcoords="offset points",
                    fontsize=7, arrowprops={"arrowstyle": "-", "color": "0.6", "linewidth": 0.6})
    if summary.get("threshold"):
        ax.axhline(summary["threshold"], color="tab:red", linestyle="--", linewidth=1,
                   label=f"threshold {summary['threshold']:g}")
    ax.set_yscale("log")
    ax.set_xlabel("median time per run (ms)")
    ax.set_ylabel(f"max accuracy loss ({summary.get('metric', '')}, log scale)")
    ax.set_title(f"{summary.get('model', '')} — {summary.get('backend', '')} {summary.get('mode', '')}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


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


def render(directory: Path, summary: dict | None = None,
           entries: Sequence[CacheEntry] | None = None) -> tuple[Path, Path]:
    """(Re)write report.md and report.png in `directory` from `entries` (default: the cache entries
    found under `directory`)."""
    from enginewright.search.routes import route_id
    from enginewright.search.winner import choose_winner
    entries = list(entries) if entries is not None else load_entries(directory)
    if not entries:
        raise FileNotFoundError(f"no cache entries (entries/*.json) under {directory}")
    summary_path = directory / "summary.json"
    if summary is None:
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    if "default_id" not in summary:
        summary["default_id"] = route_id("")
        try:
            summary["winner_id"] = choose_winner(entries, summary["default_id"], 0.03).winner_id
        except ValueError:
            summary["winner_id"] = None
    md = directory / "report.md"
    md.write_text(markdown(summary, entries))
    png = plot(summary, entries, directory / "report.png")
    return md, png
