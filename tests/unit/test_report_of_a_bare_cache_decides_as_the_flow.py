"""`enginewright report` on a directory without a summary.json (a bare cache, no recorded decision)
marks the winner the flow's own rule gives for the sweep: a reused route's number alone never wins
there either."""

from enginewright.api.cache import Paired, TimingStats
from enginewright.api.routes import Route
from enginewright.report import render
from tests.unit.test_reuse_needs_the_same_fingerprint import ROUTE, base, entry


def faster(**changes):
    return entry(
        base(),
        timing=TimingStats(median_ms=0.5, mean_ms=0.5, p90_ms=0.5, min_ms=0.5, n=10),
        baseline_ms=1.0,
        paired=Paired(ratio=0.5, low=0.45, high=0.55, rounds=5, stopped="faster"),
        **changes,
    )


def marks(tmp_path, *entries) -> dict[str, str]:
    """Route -> its mark (default, winner) in report.md's table of routes."""
    folder = tmp_path / "entries"
    folder.mkdir()
    for e in entries:
        (folder / f"{e.route_id}.json").write_text(e.to_json())
    render(tmp_path)
    table = (tmp_path / "report.md").read_text().split("## Routes\n")[1]
    rows = [line.split("|") for line in table.splitlines() if line.startswith("| ")][1:]
    return {cells[2].strip(): cells[1].strip() for cells in rows}


def test_a_reused_route_does_not_win_a_bare_cache(tmp_path):
    default = entry(base(), route=Route.of({}), run="this-run", baseline_ms=1.0)
    reused = faster().model_copy(update={"reused_from": "run earlier"})
    assert marks(tmp_path, default, reused) == {"(default)": "default winner", ROUTE.canonical: ""}


def test_a_route_measured_here_wins_a_bare_cache(tmp_path):
    default = entry(base(), route=Route.of({}), run="this-run", baseline_ms=1.0)
    assert marks(tmp_path, default, faster()) == {"(default)": "default", ROUTE.canonical: "winner"}
