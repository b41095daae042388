"""What crosses a process or the object store, typed: one writer and one reader each.

| contract | written by | read by | where it travels |
| --- | --- | --- | --- |
| `BatchRequest` | controller (`controller/jobs.py`) | worker Job (`worker/job.py`) | `<prefix>/requests/<batch>.json`, named (with its sha256) in the Job's env |
| `ProbeResult` | worker Job, probe mode | controller | `<prefix>/probe.json` |
| `ConfirmationResult` | worker Job, confirm mode | controller | `<prefix>/confirm/<batch>.json` |
| `Provenance` | controller, through `catalog/writer.py` | `catalog/` (`fetch`, `list`) | `<folder>/provenance.json` |
| `CatalogIndex` / `IndexEntry` | controller, through `catalog/writer.py` | `catalog/reader.py` | `catalog/<model>/index.json` |
| `MeasuredRoutes` | controller (`report.measured_routes`) | `catalog/site.py` | `<folder>/routes.json` |

Cache entries have their own model (`api.cache.CacheEntry`). The serving process's JSON lines
(`worker/child.py`) are not here yet: that protocol is being changed on its own.

In-run messages (request, probe, confirmation) refuse unknown fields: writer and reader are the same
release, and a field that is not read is a bug. Catalog documents outlive the operator that wrote
them, so their readers ignore fields a newer writer added.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from enginewright.api.cache import CacheEntry, Versions
from enginewright.api.fingerprint import Fingerprint
from enginewright.api.models import TuningRunSpec, WireModel
from enginewright.api.routes import Knob


class BatchRequest(WireModel):
    """What the controller hands a worker Job (the same fields `enginewright tune` fills locally)."""

    target: str = Field(description="GPU type this batch runs on.")
    mode: Literal["sweep", "confirm", "probe"] = Field(
        "sweep",
        description="sweep: build and measure `routes`; confirm: re-measure the kept engines of "
        "`routes` against the default, interleaved, and write the rounds; probe: check the inputs and write the "
        "compiler's knobs and versions to `<prefix>/probe.json`.",
    )
    stage: str = "stage1"
    batch: str = Field("probe", description="Deterministic batch name, e.g. stage1-b003.")
    bucket: str = Field(description="Bucket for entries and engines.")
    prefix: str = Field(description="Key prefix of this run and target, runs/<ns>/<run>-<uid8>/<gpu-type>.")
    routes: list[str] = Field(
        default_factory=list, description="Canonical route strings of the batch (confirm: the candidates)."
    )
    default_route: str = Field("", description="The run's default route (pinned knobs only).")
    deadline: float | None = Field(None, description="Epoch seconds: routes not started by then are skipped.")
    spec: TuningRunSpec


# ------------------------------------------------------------------------------------ probe


class KnobInfo(WireModel):
    """One compiler knob as the probe saw it (`api.routes.Knob` on the wire, `exclusive` included)."""

    name: str
    values: list[str] | None = Field(None, description="None: open-ended, swept only with values the user gives.")
    default: str
    help: str = ""
    exclusive: bool = Field(
        False, description="Its non-default values are never combined with other knobs (Inductor's compile=false)."
    )
    suggested: list[str] | None = Field(
        None,
        description="An open-ended knob's values swept when the user "
        "names none (ONNX Runtime's thread counts, from the worker's cores).",
    )

    @classmethod
    def of(cls, knob: Knob) -> "KnobInfo":
        return cls(
            name=knob.name,
            values=list(knob.values) if knob.values is not None else None,
            default=knob.default,
            help=knob.help,
            exclusive=knob.exclusive,
            suggested=list(knob.suggested) if knob.suggested is not None else None,
        )

    def knob(self) -> Knob:
        return Knob(
            self.name,
            tuple(self.values) if self.values is not None else None,
            self.default,
            self.help,
            self.exclusive,
            tuple(self.suggested) if self.suggested is not None else None,
        )


class ProbeResult(WireModel):
    """What the controller plans a target from: the compiler's knobs, its versions on a node of the
    target's type, the model's digest and input shapes. Bad inputs are written too (`ok: false`), so
    the controller can say why without reading pod logs."""

    ok: bool
    error: str | None = Field(None, description="Why the inputs are unusable (ok: false).")
    knobs: list[KnobInfo] = Field(default_factory=list)
    versions: Versions | None = None
    model_sha256: str | None = None
    model_size: int | None = None
    input_shapes: dict[str, list[int]] = Field(default_factory=dict)
    engine_suffix: str = ""
    data_sha256: dict[str, str] = Field(default_factory=dict, description="`pairs[i].inputs|references` -> sha256.")
    fingerprint: Fingerprint | None = Field(
        None,
        description="What every measurement of this target depends on "
        "(route id ''): entries of earlier runs with it are reused.",
    )

    def compiler_knobs(self) -> list[Knob]:
        return [k.knob() for k in self.knobs]


# ------------------------------------------------------------------------------- confirmation


class ConfirmationResult(WireModel):
    """One confirmation round: per-round milliseconds of each engine it timed. Keys of `rounds` are
    opaque strings chosen by the worker (`measure.paired.load_key`: one per load of each engine); the
    flow reads them and decides (`search.flow.next_step`), the worker does not."""

    batch: str
    rounds: dict[str, list[float]]


# ------------------------------------------------------------------------------------ catalog


class CatalogModel(WireModel):
    """A document of the catalog: camelCase, and fields a newer writer added are ignored."""

    model_config = ConfigDict(extra="ignore")


class EntryStack(CatalogModel):
    """The software stack an engine was measured on, as its index entry records it: what a consumer's
    stack must match (`catalog.compatibility`). Read from what the measuring process reported
    (`api.cache.Versions`); None where it did not say (a CPU run has no driver)."""

    driver_major: str | None = Field(None, description="Major version of the NVIDIA driver, e.g. 550.")
    compiler: str = Field(description="Compiler name: onnxruntime, tensorrt, inductor.")
    compiler_version: str = Field(description="Compiler name and version, as in the catalog key.")
    torch: str | None = Field(None, description="Inductor: torch's version.")
    triton: str | None = Field(None, description="Inductor: Triton's version.")
    cuda: str | None = Field(None, description="The CUDA version the compiler runtime was built with.")

    def describe(self) -> str:
        driver = f"driver {self.driver_major}" if self.driver_major else "driver unknown"
        return f"{self.compiler_version}" + (f" CUDA {self.cuda}" if self.cuda else "") + f", {driver}"


class Supersession(CatalogModel):
    """The entry that superseded this one for the model's GPU type: newer, on another stack. The
    superseded engine stays in the catalog, the one to fetch for its own stack."""

    run: str = Field(description="<namespace>/<name> of the newer entry's run.")
    run_uid: str
    folder: str
    stack: EntryStack | None = None


class IndexEntry(CatalogModel):
    """One published engine in `catalog/<model>/index.json`."""

    gpu_product: str
    compiler_version: str
    folder: str = Field(description="Key of the engine's catalog folder, relative to the bucket.")
    engine: str = Field(description="s3:// URI of the engine.")
    sha256: str
    route: str = ""
    speedup: float | None = None
    confirmed: bool | None = None
    model_sha256: str | None = None
    run: str = ""
    run_uid: str
    published_at: str = ""
    compute_capability: str | None = None
    stack: EntryStack | None = Field(None, description="None in an index written before stacks were recorded.")
    superseded_by: Supersession | None = None


class CatalogIndex(CatalogModel):
    model: str
    entries: list[IndexEntry] = Field(default_factory=list)


class TunedAtBuild(CatalogModel):
    """What the engine's build autotuned (Inductor: a Triton kernel's config, the best of a few or by
    coordinate descent, kept as a `.best_config`), which the engine keeps and a rebuild of its route
    tunes again: on an H100 resnet50's builds of one route chose otherwise for 14 of 18 kernels (CUDA
    graphs) and all 24 (coordinate descent), and with CUDA graphs and coordinate descent ran up to
    1.18x apart (`docs/benchmarks.md`, session 44)."""

    kernels: int = Field(description="Kernels that run a config the build autotuned.")
    by_coordinate_descent: int | None = Field(None, description="Of those, chosen by coordinate descent.")
    note: str = ""

    @classmethod
    def of(cls, entry: CacheEntry) -> TunedAtBuild | None:
        """From the engine's load (`loadInfo`: `tuned_placed`, the `.best_config`s the engine brought,
        and `tuned_by_descent`, None where a load before it did not say); None where the backend says
        nothing."""
        info = entry.load_info or {}
        if "tuned_placed" not in info:
            return None
        kernels, descent = int(info["tuned_placed"]), info.get("tuned_by_descent")
        return cls(
            kernels=kernels,
            by_coordinate_descent=None if descent is None else int(descent),
            note=TUNED_NOTE if kernels else UNTUNED_NOTE,
        )

    def brief(self) -> str:
        """`24 (24 by coordinate descent)`."""
        descent = f" ({self.by_coordinate_descent} by coordinate descent)" if self.by_coordinate_descent else ""
        return f"{self.kernels}{descent}"


UNCOUNTED = "choices compiled into the code (max_autotune's templates, benchmark_fusion) are not counted"
TUNED_NOTE = (
    "the engine keeps its build's choices and is what was measured and published; a rebuild of its route "
    f"autotunes again and need not run as fast; {UNCOUNTED}"
)
UNTUNED_NOTE = f"its build kept no autotuned kernel config; {UNCOUNTED}"


class EngineFacts(CatalogModel):
    uri: str
    sha256: str
    size: int | None = None
    tuned_at_build: TunedAtBuild | None = Field(
        None, description="Absent where the backend does not say (ONNX Runtime, TensorRT) and before session 44."
    )


class ModelFacts(CatalogModel):
    uri: str
    sha256: str | None = None
    format: str
    name: str
    input_shapes: dict[str, list[int]] | None = None
    declared_shapes: list[dict] = Field(default_factory=list)


class AccuracyFacts(CatalogModel):
    disabled: bool
    reason: str | None = None
    metric: str
    threshold: float | None = None
    atol: float | None = None
    rtol: float | None = None
    pairs: list[dict] = Field(default_factory=list)
    data_digests: dict[str, str] | None = None
    loss_per_output: dict[str, float | None] | None = None
    outputs: list[str] | None = Field(
        None,
        description="The outputs accuracy was checked on when the run named "
        "them (spec.accuracy.outputs); absent: every output of the model.",
    )


class RouteFacts(CatalogModel):
    id: str
    route: str
    knobs: dict[str, str] = Field(default_factory=dict)
    base_settings: dict[str, str] = Field(default_factory=dict)
    pinned: dict[str, str] = Field(default_factory=dict)


class CompilerFacts(CatalogModel):
    name: str
    versions: dict[str, str | None] | None = Field(
        None, description="`api.cache.Versions` of the winner's measurement, as written then."
    )


class GpuFacts(CatalogModel):
    product: str
    node: str | None = None
    compute_capability: str | None = None
    driver: str | None = None


class TimingFacts(CatalogModel):
    objective: str
    winner_ms: float | None = None
    default_ms: float | None = None
    speedup: float
    speedup_name: str
    sweep_speedup: float | None = None
    speedup_interval: list[float] | None = Field(
        None,
        description="The headline speedup's 95% interval across loads and rounds [low, high], where it was measured.",
    )
    loads: int | None = Field(None, description="Loads of each engine behind a confirmed decision.")
    times_ms: dict[str, float] | None = Field(None, description="ms per call of each engine in the rounds decided on.")
    host: dict | None = Field(
        None,
        description="What the host has to do with the speedup: a note, the default's host facts, host CPU ms per call.",
    )
    confirmed: bool = False
    measurements: dict[str, dict | None] = Field(default_factory=dict)
    how_measured: str = ""
    confirmation_ratios: dict[str, float] | None = None
    noise_margin: float | None = None


class SearchFacts(CatalogModel):
    mode: str
    routes_planned: int
    routes_measured: int
    outcomes: dict[str, int] = Field(default_factory=dict)
    cut_short: str | None = None


class RunFacts(CatalogModel):
    namespace: str
    name: str
    uid: str
    generation: int | None = None
    target: str


class ReuseFacts(CatalogModel):
    """What the winner's measurement depends on (`api.fingerprint`), and which routes the run took
    from earlier runs' entries instead of building them."""

    fingerprint: dict | None = Field(
        None, description="The winner's fingerprint as its entry recorded it (absent: the entry predates fingerprints)."
    )
    fingerprint_sha256: str | None = Field(None, description="Its digest: equal digests, equal measurements.")
    reused: dict[str, str] = Field(
        default_factory=dict,
        description="Route id -> the run and entry it was reused from (never the default, measured fresh).",
    )
    winner_reused_from: str | None = Field(
        None,
        description="Set when the winner is a reused route: it won "
        "through this run's confirmation round against the fresh default.",
    )


class Provenance(CatalogModel):
    """`provenance.json` beside a published engine: everything its result depends on and how it was
    measured."""

    schema_: Literal["enginewright.io/provenance/v1"] = Field("enginewright.io/provenance/v1", alias="schema")
    engine: EngineFacts
    model: ModelFacts
    accuracy: AccuracyFacts
    route: RouteFacts
    compiler: CompilerFacts
    gpu: GpuFacts
    timing: TimingFacts
    search: SearchFacts
    run: RunFacts
    operator_version: str
    published_at: str
    reuse: ReuseFacts | None = Field(None, description="Absent in provenance written before fingerprints.")


class MeasuredRoute(CatalogModel):
    """One route of the run as measured on the target (a row of report.md's routes table)."""

    id: str
    route: str = Field("", description="Canonical route string; '' is the default route.")
    stage: str = ""
    outcome: str
    route_ms: float | None = Field(
        None,
        description="The route's time per call (the run's objective): its "
        "geometric mean over its loads and paired rounds; the default's own row: "
        "the median of its rounds.",
    )
    default_ms: float | None = Field(None, description="The default's time in the same rounds as the route.")
    speedup: float | None = Field(
        None, description="default_ms / route_ms in those rounds (None on the default's own row)."
    )
    speedup_interval: list[float] | None = Field(
        None, description="That speedup's 95% interval across loads and rounds."
    )
    max_loss: float | None = None
    build_seconds: float | None = None


class MeasuredRoutes(CatalogModel):
    """`routes.json` beside a published engine: every route measured for its target, which one is the
    default and which won, and the headline the decision used (the winner's figures in a plot)."""

    schema_: Literal["enginewright.io/routes/v1"] = Field("enginewright.io/routes/v1", alias="schema")
    objective: str
    metric: str | None = None
    threshold: float | None = None
    default_id: str
    winner_id: str | None = None
    headline_speedup: float | None = None
    headline_interval: list[float] | None = None
    routes: list[MeasuredRoute] = Field(default_factory=list)
