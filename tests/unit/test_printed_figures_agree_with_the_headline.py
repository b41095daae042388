"""Every printed number agrees: the times printed beside a speedup are the ones it was computed from
(measured in the same rounds), so a headline and the times under it never point opposite ways. (A
run once printed "default 91.63 ms, winner 107.28 ms" under a 1.092x headline: the default's time
came from its solo rounds, the winner's from its paired rounds at another moment.)"""

import re

import pytest

from enginewright.api.cache import Paired
from enginewright.measure.paired import load_key
from enginewright.report import HEADER, headline, markdown, summary_rows
from enginewright.search.flow import Decided
from enginewright.search.winner import confirm
from tests.unit.entries import measured


def entry(knobs, median, paired=None):
    return measured(knobs, median, target="local", paired=paired, objective="gpuTime", engine_uri="file:///e")


DEFAULT = entry({}, 91.63)  # its solo rounds, minutes before the others: the host was faster then
WINNER = entry(
    {"intra_op_num_threads": "2"},
    107.28,
    Paired(
        ratio=100.0 / 108.0,
        low=0.90,
        high=0.955,
        rounds=6,
        stopped="faster",
        loads=2,
        default_loads=2,
        df=4,
        route_ms=100.0,
        default_ms=108.0,
    ),
)


def decided() -> Decided:
    rounds = {}
    for i in range(5):
        rounds[load_key(DEFAULT.route_id, i)] = [120.0 * (1 + 0.004 * i) * (1 + 0.01 * r) for r in range(5)]
        rounds[load_key(WINNER.route_id, i)] = [110.0 * (1 - 0.004 * i) * (1 + 0.01 * r) for r in range(5)]
    decision = confirm(rounds, DEFAULT.route_id, 0.03)
    assert decision.winner_id == WINNER.route_id
    return Decided(decision, DEFAULT, (DEFAULT, WINNER), planned=2)


def summary():
    step = decided()
    return {
        "model": "det.onnx",
        "backend": "onnxruntime",
        "mode": "mixed",
        "metric": "cosine",
        "threshold": 1e-3,
        **step.summary(),
    }


def test_the_times_under_the_headline_make_the_headline():
    s = summary()
    text = headline(s, [DEFAULT, WINNER])
    first = text.splitlines()[0]
    default_ms, winner_ms = (float(x) for x in re.findall(r"([\d.]+) ms", first))
    speedup = float(re.search(r"speedup \(headline\) ([\d.]+)x", text).group(1))
    assert default_ms / winner_ms == pytest.approx(speedup, abs=0.001)
    assert "91.63" not in text and "107.28" not in text  # no time from other rounds stands beside it
    assert re.search(r"95% [\d.]+–[\d.]+ across loads and rounds", text)


def test_each_row_speedup_is_its_two_times():
    rows = summary_rows([DEFAULT, WINNER], DEFAULT.route_id, WINNER.route_id)
    for row in rows:
        cells = dict(zip(HEADER, row))
        if cells["speedup"] != "—":
            assert float(cells["default ms"]) / float(cells["route ms"]) == pytest.approx(
                float(cells["speedup"]), abs=0.001
            )


def test_the_report_and_the_status_line_carry_the_interval():
    s = summary()
    md = markdown(s, [DEFAULT, WINNER])
    assert re.search(
        r"\*\*gpuTime speedup \(headline\) [\d.]+×\*\*: confirmation round: 5 interleaved rounds of 5 "
        r"loads each against the default, 95% [\d.]+–[\d.]+ across loads and rounds",
        md,
    )
    assert "all three measurements" not in md  # other measurements sit in a table of their own, said to be apart
    line = decided().headline_text()
    assert re.fullmatch(r"gpuTime speedup [\d.]+x \(95% [\d.]+-[\d.]+; confirmation round: .*\)", line)


def test_a_routes_progress_line_prints_the_times_its_paired_speedup_comes_from():
    # On the H200 `tune` printed "default route: 0.5883 ms" and then "-compile=false: 0.3340 ms (paired
    # speedup 0.905x)": the default ran 0.309 ms in that route's own rounds, 0.588 in its solo rounds
    # a minute before (docs/benchmarks/raw/s11/call7). The line now carries both times of its rounds.
    from enginewright.worker.batch import describe

    line = describe(WINNER)
    printed = [float(ms) for ms in re.findall(r"(\d+\.\d+) ms", line)]
    assert printed == [100.0, 108.0], line
    speedup = float(re.search(r"paired speedup (\d+\.\d+)x", line).group(1))
    assert speedup == pytest.approx(printed[1] / printed[0], abs=5e-4)
    assert "107.28" not in line  # the route's median over rounds of another moment is not beside it
