"""TuningRun spec and status.

These models are the single source of truth: `enginewright crds` generates `crds/` from them
(see `api.crd`), and cross-field rules are written twice on purpose, once as a pydantic validator
(for the CLI and the controller) and once as a CEL rule (so `kubectl apply` refuses a bad manifest).
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonDict

from enginewright.api.names import API_VERSION, KIND
from enginewright.api.routes import parse_route

# s3://bucket/key, the key one or more non-empty segments, none of them '.' or '..', no control
# characters anywhere. No look-arounds, so the API server (Go RE2), pydantic (Rust regex) and Python
# read it alike. A segment is: one non-dot character, two characters that are not '..', or 3+.
_CONTROL = r"\x00-\x1f\x7f-\x9f"
_SEGMENT = rf"(?:[^/.{_CONTROL}]|[^/.{_CONTROL}][^/{_CONTROL}]|\.[^/.{_CONTROL}]|[^/{_CONTROL}]{{3,}})"
S3_URI_PATTERN = rf"^s3://[a-z0-9][a-z0-9.\-]{{1,61}}[a-z0-9](?:/{_SEGMENT})+$"
S3_URI_MAX_LENGTH = 5 + 63 + 1 + 1024  # s3:// + bucket + / + S3's longest key
_S3_URI_RULES: JsonDict = {
    "maxLength": S3_URI_MAX_LENGTH,
    "pattern": S3_URI_PATTERN,
    "x-kubernetes-validations": [
        {
            "rule": r"!self.matches('^s3://.*/(\\.\\.?)?(/|$)') && !self.matches('[\\x00-\\x1f\\x7f-\\x9f]')",
            "message": "must be s3://bucket/key with no empty, '.' or '..' key segments and no control characters",
        }
    ],
}


def check_s3_uri(uri: str) -> str:
    """Refuse what S3_URI_PATTERN refuses, saying which part is wrong."""
    match = re.fullmatch(r"s3://([^/]*)/(.*)", uri, re.DOTALL)
    if not match or not re.fullmatch(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]", match.group(1)):
        raise ValueError(f"must be s3://bucket/key with a lowercase S3 bucket name (got {uri!r})")
    if re.search(f"[{_CONTROL}]", uri):
        raise ValueError(f"must not contain control characters (got {uri!r})")
    bad = [seg for seg in match.group(2).split("/") if seg in ("", ".", "..")]
    if bad:
        raise ValueError(
            f"the object key must not have empty, '.' or '..' segments (got {uri!r}): name the object by its plain path"
        )
    if len(uri) > S3_URI_MAX_LENGTH:
        raise ValueError(f"is longer than {S3_URI_MAX_LENGTH} characters")
    return uri


S3Uri = Annotated[str, AfterValidator(check_s3_uri)]


def duplicated(values: list[str]) -> list[str]:
    """Values that appear more than once, sorted."""
    return sorted({v for v in values if values.count(v) > 1})


def cel(rule: str, message: str, field_path: str | None = None) -> dict:
    """One `x-kubernetes-validations` entry."""
    entry = {"rule": rule, "message": message}
    if field_path:
        entry["fieldPath"] = field_path
    return entry


# Size bounds. Everything in a spec is bounded, so a manifest the API server accepts fits what carries it
# (the batch request travels through the store, not an environment variable; kopf keeps only a digest).
KEY_LENGTH = 256  # a map key (setting, knob, label key with its prefix is at most 253 + 1 + 63)
VALUE_LENGTH = 1024  # a setting value
KNOB_VALUE_LENGTH = 256  # one value of a knob to try or to pin
KNOB_VALUES_TOTAL = 1024  # values of all knobs together


def _key_at_most(limit: int):
    def check(key: str) -> str:
        if len(key) > limit:
            raise ValueError(f"key {key[:40]!r}... is {len(key)} characters long (at most {limit})")
        return key

    return AfterValidator(check)


BoundedKey = Annotated[str, _key_at_most(KEY_LENGTH)]


def keys_at_most(limit: int = KEY_LENGTH) -> dict:
    """The CEL rule bounding a map's keys (structural schemas cannot bound property names)."""
    return {
        "x-kubernetes-validations": [
            cel(f"self.all(k, size(k) <= {limit})", f"keys must be at most {limit} characters long")
        ]
    }


def default_of(model: type[BaseModel], name: str):
    """The default of `model`'s field `name`: each default is written once, in these models, and the
    layers that take the same option (tune's flags, the flow, the worker) read it from here."""
    return model.model_fields[name].get_default(call_default_factory=True)


class WireModel(BaseModel):
    """camelCase on the wire, snake_case in Python, unknown fields refused."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def wire(self) -> dict:
        """The object as it is written in a manifest (camelCase, unset fields left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# --------------------------------------------------------------------------------------- spec


class ModelFormat(str, Enum):
    onnx = "onnx"
    torch_export = "torch-export"


class ModelRef(WireModel):
    """Where the model to tune lives."""

    uri: S3Uri = Field(description="Object-store URI of the model, s3://bucket/key.", json_schema_extra=_S3_URI_RULES)
    sha256: str | None = Field(
        None,
        description="Expected SHA-256 of the model bytes; the worker refuses a model that differs.",
        pattern=r"^[a-f0-9]{64}$",
    )
    format: ModelFormat = Field(ModelFormat.onnx, description="Serialization of the model.")


class CompilerName(str, Enum):
    tensorrt = "tensorrt"
    inductor = "inductor"
    onnxruntime = "onnxruntime"


SETTINGS_ARE_KNOBS = frozenset({CompilerName.onnxruntime.value})
"""Compilers whose base settings and route knobs are one namespace (ONNX Runtime's session options):
a base setting that names a knob builds every route with that value. Inductor reads only `device`
and `input_dtype` from its settings and TensorRT only its builder settings, so for them a setting
that names a knob would be ignored by the build: the planner refuses it."""


class InputShape(WireModel):
    """Shape range of one model input (a TensorRT optimization profile); opt is what gets timed."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "size(self.opt) == size(self.min) && size(self.max) == size(self.min)",
                    "min, opt and max must have the same rank",
                ),
                cel(
                    "self.min.all(i, i >= 0) && self.opt.all(i, i >= 1)",
                    "min dimensions must be >= 0 and opt dimensions >= 1",
                ),
                # CEL has no zip: the dimensions are walked by index (rank <= 16, the field's maxItems).
                cel(
                    f"size(self.opt) != size(self.min) || size(self.max) != size(self.min) || {list(range(16))}.all(d, "
                    f"d >= size(self.min) || (self.min[d] <= self.opt[d] && self.opt[d] <= self.max[d]))",
                    "need min <= opt <= max in every dimension",
                ),
            ]
        }
    )

    name: str = Field(description="Input tensor name, as in the model.", min_length=1, max_length=256)
    min: list[int] = Field(description="Smallest shape the engine accepts.", min_length=1, max_length=16)
    opt: list[int] = Field(description="Shape the engine is optimized and timed for.", min_length=1, max_length=16)
    max: list[int] = Field(description="Largest shape the engine accepts.", min_length=1, max_length=16)

    @model_validator(mode="after")
    def _ranges(self) -> InputShape:
        if not (len(self.min) == len(self.opt) == len(self.max)):
            raise ValueError(f"input {self.name!r}: min, opt and max must have the same rank")
        for lo, mid, hi in zip(self.min, self.opt, self.max):
            if not (0 <= lo <= mid <= hi) or mid < 1:
                raise ValueError(
                    f"input {self.name!r}: need 0 <= min <= opt <= max and opt >= 1 "
                    f"(got min={self.min} opt={self.opt} max={self.max})"
                )
        return self


# A settings value that, read as a file path, leaves the worker's work directory: absolute, from a home
# directory, or with a '..' segment. Some settings are file names the compiler writes to (ONNX Runtime's
# session.optimized_model_external_initializers_file_name), and no setting needs to point outside.
_LEAVING_PATH = r"^[/\\~]|(^|[/\\])\.\.([/\\]|$)"
SettingValue = Annotated[
    str,
    Field(
        max_length=1024,
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    f"!self.matches('{_LEAVING_PATH.replace(chr(92), chr(92) * 2)}')",
                    "must not be a path out of the worker's work directory (absolute, ~, or a '..' segment): name a file "
                    "inside it",
                )
            ]
        },
    ),
]


def paths_leaving_workdir(settings: dict[str, str]) -> list[str]:
    """The settings whose values read as paths out of the work directory, sorted."""
    return sorted(k for k, v in settings.items() if re.search(_LEAVING_PATH, v))


class Compiler(WireModel):
    """The compiler and the settings every route shares, the default route included."""

    name: CompilerName = Field(description="Compiler backend that builds the routes.")
    image: str | None = Field(
        None,
        description="Worker image; defaults to the operator setting for this compiler. "
        "Only images the operator allows are run (Helm value tenancy.allowedImages).",
        max_length=512,
    )
    settings: dict[BoundedKey, SettingValue] = Field(
        default_factory=dict,
        max_length=128,
        json_schema_extra=keys_at_most(),
        description="Base settings applied to every route, the default route included, e.g. TensorRT "
        "builder_optimization_level=5, tf32=false; ONNX Runtime intra_op_num_threads=2. One that names a "
        "knob (ONNX Runtime) is that knob's value in the default route: routes hold the values that differ "
        "from it. A value must not be a path out of the worker's work directory (absolute, ~, or a '..' segment).",
    )
    input_shapes: list[InputShape] = Field(
        default_factory=list, max_length=64, description="Shape ranges per input; empty = the model's static shapes."
    )

    @model_validator(mode="after")
    def _settings_stay_in_workdir(self) -> Compiler:
        if leaving := paths_leaving_workdir(self.settings):
            raise ValueError(
                "; ".join(
                    f"spec.compiler.settings[{k}]: {self.settings[k]!r} leaves the worker's work "
                    f"directory (an absolute path, ~, or a '..' segment): name a file inside it"
                    for k in leaving
                )
            )
        return self


class SearchMode(str, Enum):
    fast = "fast"
    full = "full"
    mixed = "mixed"


class ReuseMode(str, Enum):
    none = "none"
    same_fingerprint = "sameFingerprint"


class KnobValues(WireModel):
    """One knob of the search space and the values to try."""

    name: str = Field(
        description="Knob name as the compiler reports it (TensorRT: without the leading '-').",
        min_length=1,
        max_length=256,
    )
    values: list[Annotated[str, Field(max_length=KNOB_VALUE_LENGTH)]] = Field(
        description="Values to try; the compiler's default is always measured too.", min_length=1, max_length=64
    )


class Confirm(WireModel):
    """Interleaved re-measurement of the best candidates against the default route."""

    top_k: int = Field(3, description="Candidates confirmed against the default; 0 disables the round.", ge=0, le=16)
    rounds: int = Field(
        5,
        description="Interleaved rounds (A B C A B C ...), at most: after 3 or more the round stops early "
        "once no candidate can still be confirmed (each one's 95% interval wholly above the noiseMargin "
        "line); only with loads 3 or more.",
        ge=2,
        le=100,
    )
    loads: int = Field(
        5,
        description="Loads of the default and of each candidate, all in one fresh serving "
        "process and all timed in every round: a candidate wins on the spread across loads and rounds, so "
        "one lucky load (an engine loaded again can run lastingly faster or slower) cannot make "
        "a winner.",
        ge=1,
        le=16,
    )


class Search(WireModel):
    """Which routes are tried, and how much may be spent."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!(has(self.dryRun) && self.dryRun && has(self.mode) && self.mode == 'mixed')",
                    "dryRun cannot be combined with mode mixed: its second stage depends on measurements",
                    ".dryRun",
                ),
                cel(
                    "!has(self.seedCache) || !has(self.reuse) || self.reuse != 'none'",
                    "seedCache needs reuse sameFingerprint: with reuse none nothing is taken from it",
                    ".seedCache",
                ),
                cel(
                    "!has(self.routes) || size(self.routes) == 0 || ((!has(self.knobs) || size(self.knobs) == 0) "
                    "&& (!has(self.mode) || self.mode != 'mixed'))",
                    "routes names the routes to measure: it cannot be combined with knobs or mode mixed",
                    ".routes",
                ),
            ]
        }
    )

    mode: SearchMode = Field(
        SearchMode.fast,
        description="fast: one knob at a time from the default; "
        "full: every combination; mixed: fast, then combinations of the improving knobs (on a GPU whose "
        "default is host-bound, also the fastest route that is not, with each knob that was neither faster "
        "nor slower).",
    )
    knobs: list[KnobValues] = Field(
        default_factory=list,
        max_length=256,
        description="Knob space; empty = every sweepable knob the compiler reports. Each knob may appear once.",
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "self.all(k, self.exists_one(j, j.name == k.name))",
                    "each knob name may appear once in spec.search.knobs",
                ),
                cel(
                    f"self.map(k, size(k.values)).sum() <= {KNOB_VALUES_TOTAL}",
                    f"spec.search.knobs may list at most {KNOB_VALUES_TOTAL} values in all",
                ),
            ]
        },
    )
    pinned: dict[BoundedKey, Annotated[str, Field(max_length=KNOB_VALUE_LENGTH)]] = Field(
        default_factory=dict,
        max_length=64,
        json_schema_extra=keys_at_most(),
        description="Knobs fixed in every route, the default route included.",
    )
    max_routes: int = Field(
        64, description="Budget: most routes built per target, all stages together.", ge=1, le=100000
    )
    route_timeout_seconds: int = Field(
        900, description="A route still building or measuring after this is recorded as timeout.", ge=10, le=86400
    )
    deadline_seconds: int | None = Field(
        None, description="Wall-clock budget of the whole run; routes not started by then are skipped.", ge=60
    )
    routes_per_job: int = Field(8, description="Routes one Job builds and measures.", ge=1, le=1000)
    parallelism: int = Field(1, description="Jobs running at once per target.", ge=1, le=256)
    build_parallelism: int = Field(
        1,
        description="Routes a worker Job builds at once (measuring is always one at a time, never beside a "
        "build). The Job then requests this many times the operator's default cpu and memory requests "
        "(workerJobs.requests), for each of the two that the target neither requests nor limits itself. "
        "Builds that time kernels to choose among them (Inductor's autotuning and coordinate descent, "
        "TensorRT's tactics) time them beside the other builds; a build that crashes or fails naming "
        "memory beside others is built once more alone.",
        ge=1,
        le=16,
    )
    backoff_limit: int = Field(
        2,
        description="Retries of a failed Job; a retried worker skips the routes whose entries were already written.",
        ge=0,
        le=20,
    )
    dry_run: bool = Field(False, description="List the candidate routes in the status; build nothing.")
    save_all_engines: bool = Field(
        False,
        description="Keep the engine of every route (costs storage); otherwise only routes that may win are kept.",
    )
    noise_margin: float = Field(
        0.03,
        description="Smallest relative speedup taken for real; the measured spread of the default route raises it.",
        ge=0.0,
        le=0.5,
    )
    confirm: Confirm = Field(default_factory=Confirm, description="Confirmation round.")
    reuse: ReuseMode = Field(
        ReuseMode.same_fingerprint,
        description="sameFingerprint: routes that earlier "
        "runs of this namespace measured with this run's fingerprint (model sha256, shapes, "
        "GPU, compiler versions, driver major, route, accuracy data and rule, objective) are "
        "not built again; the default route is always measured fresh, and a reused route "
        "wins only through the confirmation round against it. none: every route is measured.",
    )
    seed_cache: S3Uri | None = Field(
        None,
        description="s3://bucket/key of a trtexec tuning cache (--tuningCacheFile, or what enginewright "
        "cache export wrote), or a prefix holding such files (*.jsonl) and cache entries "
        "(entries/*.json, as a tune --cache directory or a run's prefix holds them). Read with the run's "
        "own store key, after the probe. Entries whose fingerprint is this run's for their route are "
        "taken as earlier runs' are (spec.search.reuse): never built again, the default always measured "
        "fresh, a seeded route wins only through the confirmation round. The rest, and every route of a "
        "trtexec cache (its format records no model or data digest, GPU, CUDA, driver or shapes: no "
        "fingerprint), are reported as not reusable and measured. Not a prefix of another namespace's "
        "runs.",
        json_schema_extra=_S3_URI_RULES,
    )
    routes: list[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(
        default_factory=list,
        max_length=16,
        description="Measure only the default route and these routes (route strings, -knob=value ..., as a "
        "run's status shows its winner) instead of the mode's plan, then confirm them against the default: "
        "how a TuningPolicy re-measures a published winner on a new stack. Not with knobs or mode mixed; the "
        "uncompiled route is measured only when listed.",
    )
    measure_uncompiled: bool = Field(
        True,
        description="Also measure the route that does not compile at all "
        "(Inductor: compile=false, the program run eagerly) in stage 1, as the "
        "default is, whatever the knob space: not compiling is a route, and on "
        "launch-bound models it can be the fastest. false leaves it out; pinning "
        "the knob leaves it out too. Compilers without such a route ignore it.",
    )

    @model_validator(mode="after")
    def _dry_run(self) -> Search:
        if self.dry_run and self.mode is SearchMode.mixed:
            raise ValueError(
                "spec.search.dryRun cannot be combined with mode mixed: its second stage depends on measurements"
            )
        if self.seed_cache and self.reuse is ReuseMode.none:
            raise ValueError(
                "spec.search.seedCache needs spec.search.reuse sameFingerprint (got none): with reuse none "
                "nothing is taken from it; leave seedCache out, or reuse out (its default is sameFingerprint)"
            )
        if twice := duplicated([k.name for k in self.knobs]):
            raise ValueError(f"spec.search.knobs lists a knob twice: {twice}")
        if self.routes and (self.knobs or self.mode is SearchMode.mixed):
            raise ValueError(
                "spec.search.routes names the routes to measure: it cannot be combined with spec.search.knobs or "
                "mode mixed (leave those out)"
            )
        for text in self.routes:
            try:
                if not parse_route(text):
                    raise ValueError("it sets no knob (the default route is always measured)")
            except ValueError as exc:
                raise ValueError(f"spec.search.routes: {text!r}: {exc}") from None
        if (total := sum(len(k.values) for k in self.knobs)) > KNOB_VALUES_TOTAL:
            raise ValueError(f"spec.search.knobs may list at most {KNOB_VALUES_TOTAL} values in all (got {total})")
        return self


class Metric(str, Enum):
    abs = "abs"
    squared = "squared"
    max = "max"
    cosine = "cosine"
    l0 = "l0"


class ReferencePair(WireModel):
    """Representative inputs and the outputs the reference (unoptimized) model gives for them."""

    inputs: S3Uri = Field(
        description="s3:// URI of an .npz holding one array per model input.", json_schema_extra=_S3_URI_RULES
    )
    references: S3Uri = Field(
        description="s3:// URI of an .npz holding one array per model output.", json_schema_extra=_S3_URI_RULES
    )


class Accuracy(WireModel):
    """Accuracy validation: a route whose loss reaches the threshold on any output cannot win."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "self.disabled || (has(self.pairs) && size(self.pairs) >= 2)",
                    "accuracy needs at least 2 reference pairs (or disabled: true with a reason)",
                    ".pairs",
                ),
                cel(
                    "self.disabled || has(self.threshold)",
                    "accuracy.threshold is required unless disabled",
                    ".threshold",
                ),
                cel(
                    "!self.disabled || (has(self.reason) && size(self.reason) > 0)",
                    "accuracy.disabled needs a reason",
                    ".reason",
                ),
            ]
        }
    )

    disabled: bool = Field(
        False, description="Turn validation off; needs a reason, and the status then says the winner was not validated."
    )
    reason: str | None = Field(None, description="Why validation is off.", max_length=1024)
    pairs: list[ReferencePair] = Field(default_factory=list, max_length=64, description="Reference pairs.")
    outputs: list[Annotated[str, Field(min_length=1, max_length=KEY_LENGTH)]] = Field(
        default_factory=list,
        max_length=64,
        json_schema_extra={"x-kubernetes-list-type": "set"},
        description="The model outputs accuracy is checked on; empty = every output of the model. Every output "
        "checked needs a tensor in every references file (the probe refuses the run otherwise, with "
        "InvalidInput naming the file and the output).",
    )
    metric: Metric = Field(
        Metric.cosine,
        description="abs: mean absolute error; squared: mean squared error; "
        "max: max absolute error; cosine: 1 - cosine similarity; l0: fraction of elements "
        "with |d| > atol + rtol*|ref| (trtexec parity).",
    )
    threshold: float | None = Field(None, description="A tensor fails when its loss is >= threshold.", gt=0)
    atol: float = Field(1e-5, description="Absolute tolerance (l0 only).", ge=0)
    rtol: float = Field(1e-5, description="Relative tolerance (l0 only).", ge=0)

    @model_validator(mode="after")
    def _on_by_default(self) -> Accuracy:
        if self.disabled:
            if not self.reason:
                raise ValueError("spec.accuracy.disabled needs spec.accuracy.reason")
            return self
        if len(self.pairs) < 2:
            raise ValueError(f"spec.accuracy.pairs needs at least 2 reference pairs (got {len(self.pairs)})")
        if self.threshold is None:
            raise ValueError("spec.accuracy.threshold is required unless accuracy is disabled")
        if twice := duplicated(self.outputs):
            raise ValueError(f"spec.accuracy.outputs lists an output twice: {twice}")
        return self


class Objective(str, Enum):
    """What a route's time is, and so what the winner minimises (trtexec's three measurements)."""

    latency = "latency"
    throughput = "throughput"
    gpu_time = "gpuTime"


class Timing(WireModel):
    """How each route is timed: against the default route, in paired rounds, until the comparison is
    decided (sequential stopping)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!has(self.maxRounds) || !has(self.minRounds) || self.maxRounds >= self.minRounds",
                    "maxRounds must be >= minRounds",
                    ".maxRounds",
                ),
            ]
        }
    )

    objective: Objective = Field(
        Objective.gpu_time,
        description=(
            "What the winner minimises. gpuTime (default): the device's time per call (device events around "
            "each call, inputs already on the device); on CPU compilers the compute time per call on inputs "
            "in place. latency: one call from host inputs to host outputs (copy in, run, copy out, wait), host "
            "clock: what one request from host memory sees, copies included. throughput: calls queued back "
            "to back on inputs on the device, waited for once: time per call when requests overlap. All "
            "three are recorded for every route."
        ),
    )
    warmup_iterations: int = Field(
        10, description="Untimed calls before timing (at most ~2 s of them).", ge=0, le=100000
    )
    round_seconds: float = Field(
        0.05,
        description="Each engine is timed for about this long per round "
        "(one call at least), after untimed calls for half as long.",
        ge=0,
        le=60,
    )
    min_rounds: int = Field(
        5,
        description="Paired rounds (default and route in one process, each round "
        "interleaved block by block) before the comparison may stop (but see minRoundsIfSlower).",
        ge=2,
        le=1000,
    )
    min_rounds_if_slower: int = Field(
        2,
        description="Paired rounds after which a route slower than the default beyond the noise margin "
        "(its interval wholly above 1 + margin) stops, placed `slower`: it cannot win, so this makes no "
        "false winner. minRounds or more: such a route waits for minRounds like any other.",
        ge=2,
        le=1000,
    )
    max_rounds: int = Field(30, description="Paired rounds at most.", ge=2, le=1000)
    precision: float = Field(
        0.01,
        description="Stop once the 95% interval of the route/default ratio is "
        "within +-precision, or lies wholly on one side of the noise margin.",
        gt=0,
        le=0.5,
    )
    loads: int = Field(
        2,
        description="Loads of the default and of each route timed in paired rounds (every "
        "round interleaves all of them); the ratio's interval comes from the spread across loads, "
        "pooled over the engines of the batch, and the rounds' moments. 1: one load each, the rounds as samples.",
        ge=1,
        le=16,
    )

    @model_validator(mode="after")
    def _rounds_in_order(self) -> Timing:
        if self.max_rounds < self.min_rounds:
            raise ValueError(f"spec.timing.maxRounds ({self.max_rounds}) is below minRounds ({self.min_rounds})")
        return self


class Toleration(WireModel):
    """A pod toleration (core/v1 Toleration)."""

    key: str | None = Field(None, max_length=KEY_LENGTH + 61)
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = Field(None, max_length=KEY_LENGTH)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


# A resource quantity as Kubernetes writes it: an integer (`cpu: 2`) or a string (`500m`, `16Gi`); the
# pattern is apimachinery's (resource.Quantity), applied by the API server to strings only.
_QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"


def _quantity(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and re.fullmatch(_QUANTITY_PATTERN, value):
        return value
    raise ValueError(f"must be a resource quantity such as 2, 500m or 16Gi (got {value!r})")


Quantity = Annotated[
    str, BeforeValidator(_quantity), WithJsonSchema({"x-kubernetes-int-or-string": True, "pattern": _QUANTITY_PATTERN})
]


class Resources(WireModel):
    """Container resources of the worker; a quantity is an integer or a string (2, 500m, 16Gi)."""

    requests: dict[str, Quantity] = Field(
        default_factory=dict,
        description="Requests; cpu and memory default to the operator's workerJobs.requests (a resource "
        "given only a limit here gets no default request: Kubernetes then requests the limit).",
    )
    limits: dict[str, Quantity] = Field(default_factory=dict, description="Limits.")


class Target(WireModel):
    """One GPU type to tune for; every target gets its own routes, cache and catalog entry."""

    gpu_type: str = Field(
        description="Value of the operator's GPU-type node label, e.g. NVIDIA-H200.",
        min_length=1,
        max_length=63,
        pattern=r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$",
    )
    node_selector: dict[Annotated[str, _key_at_most(KEY_LENGTH + 61)], Annotated[str, Field(max_length=63)]] = Field(
        default_factory=dict,
        max_length=32,
        json_schema_extra=keys_at_most(KEY_LENGTH + 61),
        description="Extra node selector (label key -> value).",
    )
    tolerations: list[Toleration] = Field(default_factory=list, max_length=32)
    resources: Resources = Field(default_factory=Resources, description="Worker container resources.")
    gpus_per_job: int = Field(
        1, description="GPUs requested by each Job (nvidia.com/gpu); 0 for CPU compilers.", ge=0, le=16
    )


class Publish(WireModel):
    """Where the winning engine goes."""

    bucket: str | None = Field(
        None,
        description="Catalog bucket; defaults to the operator setting.",
        pattern=r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$",
    )
    model_name: str | None = Field(
        None,
        description="Model name in catalog keys; defaults to the run's name.",
        pattern=r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$",
        max_length=128,
    )
    enabled: bool = Field(True, description="Publish the winner to the catalog.")


class TuningRunSpec(WireModel):
    """What to tune, for which GPUs, and how."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "self.targets.all(t, self.targets.exists_one(u, u.gpuType == t.gpuType))",
                    "each gpuType may appear once in targets",
                    ".targets",
                ),
                cel(
                    "self == oldSelf",
                    "spec is immutable: a TuningRun's results belong to the spec that produced them; "
                    "apply the new spec as a new TuningRun (another name)",
                ),
            ]
        }
    )

    model: ModelRef = Field(description="The model to tune.")
    compiler: Compiler = Field(description="The compiler and its base settings.")
    search: Search = Field(default_factory=Search, description="The route search.")
    accuracy: Accuracy = Field(description="Accuracy validation (on unless disabled with a reason).")
    timing: Timing = Field(default_factory=Timing, description="Timing of each route.")
    targets: list[Target] = Field(description="GPU types to tune for.", min_length=1, max_length=16)
    publish: Publish = Field(default_factory=Publish, description="Catalog publishing.")

    @model_validator(mode="after")
    def _targets_unique(self) -> TuningRunSpec:
        if twice := duplicated([t.gpu_type for t in self.targets]):
            raise ValueError(f"spec.targets: each gpuType may appear once ({twice} repeated)")
        return self


# ------------------------------------------------------------------------------------- status


class Phase(str, Enum):
    pending = "Pending"
    running = "Running"
    confirming = "Confirming"
    publishing = "Publishing"
    succeeded = "Succeeded"
    failed = "Failed"


class Condition(WireModel):
    """A Kubernetes-style condition (metav1.Condition)."""

    type: str = Field(
        description="Ready, Reconciling or Stalled (kstatus): Ready=True once the run succeeded; "
        "Reconciling=True while it works; Stalled=True when it cannot go on without a change."
    )
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(
        "", description="CamelCase cause, e.g. Succeeded, Reconciling, Unschedulable, ObjectNotFound, InvalidInput."
    )
    message: str = Field("", description="What happened, naming the field or object to fix.")
    last_transition_time: str | None = Field(None, description="When the status last changed (RFC 3339).")
    observed_generation: int | None = Field(None, description="metadata.generation the condition was set for.")


class RouteResult(WireModel):
    """A route and how it did, as shown in the status."""

    route_id: str = Field(description="Stable id of the route (a hash of its canonical string); the cache entry's key.")
    route: str = Field(description="Canonical route string; empty = the default route.")
    median_ms: float | None = Field(None, description="Median time of one call in milliseconds.")
    speedup: float | None = Field(None, description="Default-route time / this route's time.")
    speedup_low: float | None = Field(
        None, description="Lower end of the speedup's 95% interval across loads and rounds."
    )
    speedup_high: float | None = Field(
        None, description="Upper end of the speedup's 95% interval across loads and rounds."
    )
    max_loss: float | None = Field(None, description="Largest accuracy loss over the outputs (spec.accuracy.metric).")


class TargetStatus(WireModel):
    """Progress and result for one GPU type."""

    gpu_type: str = Field(description="The target's spec.targets[].gpuType.")
    stage: str = Field("pending", description="pending, probing, stage1, stage2, confirming, publishing, done, failed.")
    planned: int = Field(0, description="Routes planned so far (mixed mode plans stage 2 after stage 1).")
    done: int = Field(0, description="Routes measured that passed accuracy.")
    failed: int = Field(0, description="Routes whose build or run crashed, failed or timed out.")
    rejected: int = Field(0, description="Routes rejected by accuracy.")
    default_ms: float | None = Field(None, description="Median time of the default route in milliseconds.")
    best: RouteResult | None = Field(
        None, description="The fastest measured route (against its own batch's default), while the search runs."
    )
    winner: RouteResult | None = Field(
        None,
        description="The decided route (the default route when none was "
        "confirmed faster) and the speedup the decision measured.",
    )
    candidates: list[str] = Field(default_factory=list, description="Dry run: the routes that would be built.")
    cache_config_maps: list[str] = Field(
        default_factory=list, description="ConfigMaps holding this target's cache entries (shards, in order)."
    )
    engine_uri: str | None = Field(None, description="The published engine in the catalog.")
    engine_sha256: str | None = Field(None, description="SHA-256 of the published engine bytes.")
    speedup: str | None = Field(
        None,
        description="Winner over the default route, its 95% interval across loads and rounds, and how it was measured.",
    )
    host: str | None = Field(
        None,
        description="Said when the default route is host-bound (then the win comes "
        "from launch overhead and its size depends on the serving host's CPU), and when timings of the "
        "default's or the winner's sweep rounds began beside busy threads (a loaded host).",
    )
    decision: str | None = Field(None, description="Why this route won (or why the default was kept).")
    cut_short: str | None = Field(None, description="Why the search stopped before every planned route was measured.")
    active_jobs: int = Field(0, description="Worker Jobs of this target running (or waiting for a node) now.")
    unmeasured: int = Field(0, description="Planned routes whose Job ended without a usable cache entry.")
    refused: list[str] = Field(
        default_factory=list,
        description="Cache entries refused (unreadable or "
        "inconsistent), with the reason; their routes count as unmeasured.",
    )
    gpu_seconds: float | None = Field(None, description="GPU time spent building and measuring.")
    reused: int = Field(
        0,
        description="Routes taken from earlier runs of this namespace with this run's "
        "fingerprint (spec.search.reuse), not built again.",
    )
    reused_from: list[str] = Field(default_factory=list, description="The earlier runs they came from (<run>-<uid8>).")
    seeded: int = Field(
        0,
        description="Routes taken from spec.search.seedCache with this run's fingerprint, not built again "
        "(each one's entry says where it came from: reusedFrom).",
    )
    seed: str | None = Field(
        None,
        description="What spec.search.seedCache held: routes seeded, and why the others were not reusable.",
    )
    blocked_since: str | None = Field(
        None,
        description="While a pod of this target sits on its node with a container that cannot start "
        "(reason ContainerCannotStart): when the operator first saw it (RFC 3339). The start wait "
        "(scheduling.startTimeoutSeconds) counts from it.",
    )
    message: str | None = Field(None, description="What the target is doing, or how it ended.")
    reason: str | None = Field(
        None,
        description="Why the target failed (CamelCase, as in the Stalled condition), "
        "or while it runs why it waits (Unschedulable: a pod has no node yet; ContainerCannotStart: a pod on its "
        "node cannot start its container, e.g. ErrImagePull).",
    )


class TuningRunStatus(WireModel):
    """Observed state of a TuningRun."""

    model_config = ConfigDict(extra="allow")  # kopf keeps its own bookkeeping beside ours

    phase: Phase = Field(
        Phase.pending,
        description="Pending (checks, probe), Running (stages 1 and 2), "
        "Confirming, Publishing, Succeeded or Failed. A Pending run may be stalled: see the "
        "Ready condition's reason.",
    )
    observed_generation: int | None = Field(
        None,
        description="metadata.generation this status was written for; "
        "a status older than the spec is not yet about it.",
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Reconciling and Stalled, as "
        "kstatus reads them (kubectl wait --for=condition=Ready, Flux, Helm 4).",
    )
    progress: str | None = Field(None, description="done/planned routes over all targets.")
    best_speedup: str | None = Field(
        None,
        description="Best decided speedup over the default and the timing objective it measures, e.g. 1.23x latency.",
    )
    accuracy_validated: bool | None = Field(None, description="False when accuracy validation was disabled.")
    targets: list[TargetStatus] = Field(default_factory=list, description="Progress and result per GPU type.")
    message: str | None = Field(None, description="The run's latest news: each target's message, or why it stalled.")


class ObjectMeta(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    namespace: str | None = None


class TuningRun(WireModel):
    """A manifest: apiVersion, kind, metadata, spec (and status when read back)."""

    model_config = ConfigDict(extra="ignore")

    api_version: Literal[API_VERSION] = API_VERSION  # type: ignore[valid-type]
    kind: Literal[KIND] = KIND  # type: ignore[valid-type]
    metadata: ObjectMeta
    spec: TuningRunSpec
    status: TuningRunStatus | None = None
