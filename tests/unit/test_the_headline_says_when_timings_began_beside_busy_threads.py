"""When timings of the default or the winner began while the measuring process's other threads were
still busy (`Host.busyStarts`: the quiet wait gave up), the headline's host note says how many, so the
status, report and provenance do not present them as quiet-host figures; where none did, it says
nothing of it."""

from enginewright.api.cache import Host
from enginewright.measure.paired import load_key
from enginewright.search.flow import Decided
from enginewright.search.winner import confirm
from tests.unit.entries import measured


def entry(knobs, median, busy_starts, reused_from=None):
    host = Host(cpu_model="AMD EPYC", cpus=2, load_average=3.1, busy_starts=busy_starts)
    return measured(
        knobs, median, target="cpu", objective="latency", engine_uri="file:///e", reused_from=reused_from
    ).model_copy(update={"host": host})


def decided(default_busy: int, winner_busy: int, reused_from=None) -> Decided:
    default = entry({}, 10.0, default_busy)
    winner = entry({"enable_mem_pattern": "0"}, 8.0, winner_busy, reused_from)
    rounds = {}
    for i in range(3):
        rounds[load_key(default.route_id, i)] = [10.0 * (1 + 0.002 * i) * (1 + 0.003 * r) for r in range(5)]
        rounds[load_key(winner.route_id, i)] = [8.0 * (1 - 0.002 * i) * (1 + 0.003 * r) for r in range(5)]
    decision = confirm(rounds, default.route_id, 0.03)
    assert decision.winner_id == winner.route_id and decision.confirmed
    return Decided(decision, default, (default, winner), planned=2)


def test_busy_starts_of_the_default_and_the_winner_are_said():
    note = decided(2, 3).headline()["host"]
    assert note is not None and note.startswith("5 timings of the default's and the winner's sweep rounds began")


def test_a_quiet_measurement_adds_no_note():
    assert decided(0, 0).headline()["host"] is None


def test_a_reused_winners_count_is_another_runs_and_not_said():
    assert decided(0, 4, reused_from="team-a/earlier-run").headline()["host"] is None
