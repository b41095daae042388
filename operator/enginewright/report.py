"""Reports of a tuning result: a markdown table and a PNG of time against accuracy loss."""

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
        return (e.route_id != default_id, e.median_ms is None, e.median_ms or 0.0, e.route)
    rows = []
    for e in sorted(entries, key=order):
        mark = "default" if e.route_id == default_id else ""
        if e.route_id == winner_id:
            mark = (mark + " winner").strip()
        speed = e.baseline_ms / e.median_ms if e.baseline_ms and e.median_ms else None
        rows.append([mark, e.route or "(default)", e.stage, e.outcome.value, _fmt(e.median_ms, ".4f"),
                     _fmt(e.timing.p90_ms if e.timing else None, ".4f"), _fmt(speed, ".3f"),
                     _fmt(max_loss(e), ".3g"), _fmt(e.build_seconds, ".1f")])
    return rows


HEADER = ["", "route", "stage", "outcome", "median ms", "p90 ms", "speedup", "max loss", "build s"]


def markdown(summary: dict, entries: Sequence[CacheEntry]) -> str:
    rows = summary_rows(entries, summary["default_id"], summary.get("winner_id"))
    lines = [f"# Tuning report: {summary.get('model', '')}", ""]
    for key in ("backend", "versions", "mode", "metric", "threshold", "noise_margin", "decision", "speedup",
                "routes", "build_seconds", "measure_seconds", "wall_seconds"):
        if summary.get(key) is not None:
            lines.append(f"- **{key.replace('_', ' ')}**: {summary[key]}")
    if summary.get("confirmation"):
        lines.append(f"- **confirmation ratios** (candidate/default, geometric mean): "
                     + ", ".join(f"`{k}` {v:.3f}" for k, v in summary["confirmation"].items()))
    lines += ["", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def table(summary: dict, entries: Sequence[CacheEntry]) -> str:
    """The summary table for a terminal."""
    rows = [HEADER] + summary_rows(entries, summary["default_id"], summary.get("winner_id"))
    widths = [min(60, max(len(r[i]) for r in rows)) for i in range(len(HEADER))]
    return "\n".join("  ".join(cell[:60].ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def plot(summary: dict, entries: Sequence[CacheEntry], path: Path) -> Path:
    """GPU time against accuracy loss for every measured route; default and winner marked,
    threshold drawn."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=110)
    floor = 1e-12
    colours = {Outcome.ok: "tab:blue", Outcome.accuracy_rejected: "tab:red"}
    for outcome, colour in colours.items():
        pts = [(e.median_ms, max(max_loss(e) or 0.0, floor)) for e in entries if e.outcome is outcome and e.timing]
        if pts:
            ax.scatter(*zip(*pts), s=28, c=colour, alpha=0.8,
                       label="passed" if outcome is Outcome.ok else "rejected by accuracy")
    by_id = {e.route_id: e for e in entries}
    for rid, label, marker, colour in ((summary["default_id"], "default", "s", "black"),
                                       (summary.get("winner_id"), "winner", "*", "gold")):
        e = by_id.get(rid)
        if e and e.timing:
            ax.scatter([e.median_ms], [max(max_loss(e) or 0.0, floor)], s=220 if marker == "*" else 90,
                       marker=marker, facecolors=colour, edgecolors="black", zorder=5, label=label)
    if summary.get("threshold"):
        ax.axhline(summary["threshold"], color="tab:red", linestyle="--", linewidth=1,
                   label=f"threshold {summary['threshold']:g}")
    ax.set_yscale("log")
    ax.set_xlabel("median time per run (ms)")
    ax.set_ylabel(f"max accuracy loss ({summary.get('metric', '')}, log; 0 shown at {floor:g})")
    ax.set_title(f"{summary.get('model', '')} — {summary.get('backend', '')} {summary.get('mode', '')}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
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
