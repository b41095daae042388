"""Reports of a tuning result: a markdown table and a PNG of time against accuracy loss.

Ratios are computed here from the measured times, at full precision, and rounded once when shown;
each is labelled with the two measurements it compares (a route is compared with the default route
measured in its own batch, which can differ from the run's default entry, measured in another batch).
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


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator and denominator else None


def summary_rows(entries: Sequence[CacheEntry], default_id: str, winner_id: str | None) -> list[list[str]]:
    def order(e: CacheEntry):
        return (e.route_id != default_id, e.median_ms is None, e.median_ms or 0.0, e.route)
    default = next((e for e in entries if e.route_id == default_id), None)
    run_default_ms = default.median_ms if default else None
    rows = []
    for e in sorted(entries, key=order):
        mark = "default" if e.route_id == default_id else ""
        if e.route_id == winner_id:
            mark = (mark + " winner").strip()
        rows.append([mark, e.route or "(default)", e.stage, e.batch or "—", e.outcome.value, _fmt(e.median_ms, ".4f"),
                     _fmt(e.timing.p90_ms if e.timing else None, ".4f"),
                     _fmt(_ratio(e.baseline_ms, e.median_ms), ".3f"), _fmt(_ratio(run_default_ms, e.median_ms), ".3f"),
                     _fmt(max_loss(e), ".3g"), _fmt(e.build_seconds, ".1f")])
    return rows


HEADER = ["", "route", "stage", "batch", "outcome", "median ms", "p90 ms", "× own batch's default",
          "× run's default", "max loss", "build s"]
LEGEND = ("`× own batch's default`: the default route's median measured in the same batch divided by this "
          "route's median (the ratio the sweep decides on); `× run's default`: the run's default entry "
          "(its first batch) divided by this route's median.")


def speedups(summary: dict, entries: Sequence[CacheEntry]) -> list[tuple[float, str]]:
    """(ratio, what it compares) for the winner, at full precision, the ratio the decision used last."""
    by_id = {e.route_id: e for e in entries}
    default, winner = by_id.get(summary["default_id"]), by_id.get(summary.get("winner_id"))
    if default is None or winner is None or not (default.median_ms and winner.median_ms):
        return []
    if winner is default:
        return [(1.0, "the default route is kept")]
    ratios = summary.get("confirmation") or {}
    lines = [(default.median_ms / winner.median_ms,
              f"winner vs the run's default entry: {default.median_ms:.4f} / {winner.median_ms:.4f} ms "
              f"(batches {default.batch} and {winner.batch})")]
    if winner.baseline_ms:
        used = "" if winner.route_id in ratios else "; the sweep's decision"
        lines.append((winner.baseline_ms / winner.median_ms,
                      f"winner vs the default measured in its own batch {winner.batch}: "
                      f"{winner.baseline_ms:.4f} / {winner.median_ms:.4f} ms{used}"))
    if winner.route_id in ratios:
        lines.append((1.0 / ratios[winner.route_id],
                      "confirmation rounds: geometric mean of the paired default/winner ratios; the decision"))
    return lines


def headline(summary: dict, entries: Sequence[CacheEntry]) -> str:
    """The lines `enginewright tune` ends with: times, each speedup with what it compares, decision."""
    by_id = {e.route_id: e for e in entries}
    default, winner = by_id.get(summary["default_id"]), by_id.get(summary.get("winner_id"))
    lines = [f"default route {_fmt(default.median_ms if default else None, '.4f')} ms; winner "
             f"{(winner.route if winner else '') or '(default)'} {_fmt(winner.median_ms if winner else None, '.4f')} ms"]
    lines += [f"speedup {ratio:.3f}x: {what}" for ratio, what in speedups(summary, entries)]
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
    lines += [f"- **speedup {ratio:.3f}×**: {what}" for ratio, what in speedups(summary, entries)]
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
