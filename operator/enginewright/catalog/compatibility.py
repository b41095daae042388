"""Which catalog engines a machine may run, and which one to hand over: pure rules over plain data.

An engine is only as portable as its compiler makes it. The rules, per compiler:

- TensorRT: the runtime's TensorRT version must equal the builder's (NVIDIA: "by default, TensorRT
  engines are compatible only with the version of TensorRT used to build them"), unless the engine
  was built with `version_compatible` (then any runtime at least as new, builder >= 8.6). The GPU:
  the same product; or the same compute capability (the plan is tied to the SM architecture;
  NVIDIA warns that using it on another model of device may cost performance); or what a declared
  `hardware_compatibility_level` allows (1 = Ampere and newer: compute capability >= 8.0;
  2 = the same compute capability).
- Inductor (torch.compile caches): the same torch, Triton and CUDA versions, on the same GPU product
  (its Triton kernels were autotuned there).
- ONNX Runtime: the same major.minor version, on the same GPU product.

For every compiler a time-sliced GPU (`-SHARED`) takes the engines of the same GPU unshared
(`gpu_names.catalog_products`). When several engines fit, the closest GPU match wins, then one
measured on the consumer's driver major (its stack: a newer engine for another stack supersedes an
entry without removing it, so each stack keeps its own), then the newest (or the fastest, or a
pinned run). No engine of the consumer's driver: the others that fit, and the selection says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from enginewright.catalog.gpu_names import catalog_products

NEWEST, SPEEDUP = "newest", "speedup"
TRUE = ("true", "1", "on")

# How closely an engine's GPU matches this machine's; lower is better.
SAME_PRODUCT, SAME_HARDWARE, SAME_COMPUTE_CAPABILITY, HARDWARE_COMPATIBLE = range(4)
GPU_MATCH_WORDS = {
    SAME_PRODUCT: "the same GPU product",
    SAME_HARDWARE: "the same GPU (not time-sliced)",
    SAME_COMPUTE_CAPABILITY: "the same compute capability",
    HARDWARE_COMPATIBLE: "its declared hardware-compatibility level",
}


@dataclass(frozen=True)
class Installed:
    """A compiler runtime installed on the consumer: its version string as the backends write it
    (`onnxruntime-1.32.0`, `tensorrt-10.13.0.35`, `inductor-torch-2.9.0+cu128-triton-3.5.0`) and,
    for Inductor, the CUDA version torch was built with."""

    version: str
    cuda: str | None = None


@dataclass(frozen=True)
class Consumer:
    """The machine that wants an engine."""

    gpu_product: str
    compute_capability: str | None = None
    compilers: dict[str, Installed] = field(default_factory=dict)  # compiler name -> installed version
    driver_major: str | None = None  # None: not known (any driver's engine fits as well)

    def describe(self) -> str:
        cc = f" (compute capability {self.compute_capability})" if self.compute_capability else ""
        installed = (
            ", ".join(i.version + (f" with CUDA {i.cuda}" if i.cuda else "") for i in self.compilers.values())
            or "no compiler runtime"
        )
        driver = f", driver major {self.driver_major}" if self.driver_major else ", driver not given"
        return f"GPU {self.gpu_product}{cc}, {installed}{driver}"


@dataclass(frozen=True)
class Offer:
    """One catalog entry: its index entry plus what its provenance adds."""

    gpu_product: str
    compiler_version: str
    run_uid: str
    run: str
    published_at: str
    sha256: str
    engine: str
    folder: str
    speedup: float | None = None
    confirmed: bool | None = None
    compute_capability: str | None = None
    cuda: str | None = None
    accuracy_validated: bool | None = None  # None: unknown (no provenance read)
    worst_loss: float | None = None
    hardware_compatibility_level: int = 0
    version_compatible: bool = False
    driver_major: str | None = None  # of the measuring machine; None: not recorded
    superseded_by: str | None = None  # the run of the newer entry for another stack, and that stack

    @property
    def compiler(self) -> str:
        return compiler_name(self.compiler_version)

    def describe(self) -> str:
        speed = f"{self.speedup:.3f}x" if self.speedup is not None else "?x"
        driver = f"driver {self.driver_major}" if self.driver_major else "driver not recorded"
        cuda = f" CUDA {self.cuda}" if self.cuda else ""
        superseded = f", superseded by {self.superseded_by}" if self.superseded_by else ""
        return (
            f"{self.gpu_product} {self.compiler_version} run {self.run} ({self.run_uid[:8]}) "
            f"published {self.published_at} {speed} ({driver}{cuda}{superseded})"
        )

    @classmethod
    def from_catalog(cls, entry: dict, provenance: dict | None = None) -> "Offer":
        """An offer from an `index.json` entry and (when read) the engine's `provenance.json`."""
        prov = provenance or {}
        accuracy = prov.get("accuracy") or {}
        route = prov.get("route") or {}
        settings = {**(route.get("baseSettings") or {}), **(route.get("knobs") or {})}
        versions = (prov.get("compiler") or {}).get("versions") or {}
        losses = [v for v in (accuracy.get("lossPerOutput") or {}).values() if v is not None]
        try:
            level = int(settings.get("hardware_compatibility_level", 0))
        except (TypeError, ValueError):
            level = 0
        from enginewright.api.contracts import IndexEntry
        from enginewright.api.fingerprint import driver_major

        item = IndexEntry.model_validate(entry)
        stack, newer = item.stack, item.superseded_by
        # An entry from before stacks were recorded: its provenance says what the measurement saw.
        driver = (stack.driver_major if stack else None) or driver_major(
            versions.get("driver") or (prov.get("gpu") or {}).get("driver")
        )
        return cls(
            gpu_product=item.gpu_product,
            compiler_version=item.compiler_version,
            run_uid=item.run_uid,
            run=item.run,
            published_at=item.published_at,
            sha256=item.sha256,
            engine=item.engine,
            folder=item.folder,
            speedup=item.speedup,
            confirmed=item.confirmed,
            compute_capability=item.compute_capability or (prov.get("gpu") or {}).get("computeCapability"),
            cuda=(stack.cuda if stack else None) or versions.get("cuda"),
            accuracy_validated=(not accuracy["disabled"]) if "disabled" in accuracy else None,
            worst_loss=max(losses) if losses else None,
            hardware_compatibility_level=level,
            version_compatible=str(settings.get("version_compatible", "")).lower() in TRUE,
            driver_major=driver,
            superseded_by=(
                f"run {newer.run} ({newer.run_uid[:8]})" + (f" for {newer.stack.describe()}" if newer.stack else "")
                if newer
                else None
            ),
        )


def compiler_name(compiler_version: str) -> str:
    """`onnxruntime-1.32.0` -> onnxruntime; `inductor-torch-...` -> inductor."""
    return compiler_version.split("-", 1)[0]


def release(version: str) -> tuple[int, ...]:
    """The leading numeric release of a version: '2.9.0+cu128' -> (2, 9, 0); '10.13.0.35' -> (10, 13, 0, 35)."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(p) for p in match.group(0).split(".")) if match else ()


def _bare(compiler_version: str) -> str:
    return compiler_version.split("-", 1)[1] if "-" in compiler_version else ""


def inductor_parts(compiler_version: str) -> tuple[str, str | None]:
    """(torch, triton) of `inductor-torch-<torch>[-triton-<triton>]`."""
    match = re.fullmatch(r"inductor-torch-(.+?)(?:-triton-(.+))?", compiler_version)
    if not match:
        raise ValueError(
            f"not an Inductor compiler version: {compiler_version!r} "
            f"(expected inductor-torch-<version>[-triton-<version>])"
        )
    return match.group(1), match.group(2)


def _cc(text: str | None) -> tuple[int, ...] | None:
    return release(text) if text else None


def version_problem(offer: Offer, installed: Installed | None) -> str | None:
    """Why this machine's compiler cannot load the offer's engine; None when it can."""
    name = offer.compiler
    if installed is None:
        return f"built by {offer.compiler_version}; no {name} is installed here"
    built, have = offer.compiler_version, installed.version
    if compiler_name(have) != name:
        return f"built by {built}; the installed compiler is {have}"
    if name == "tensorrt":
        if _bare(built) == _bare(have):
            return None
        builder, runtime = release(_bare(built)), release(_bare(have))
        if offer.version_compatible and builder >= (8, 6) and runtime >= builder:
            return None
        why = (
            "a version-compatible engine needs a runtime at least as new"
            if offer.version_compatible
            else "a TensorRT engine needs the same TensorRT version"
        )
        return f"built by {built}, installed {have}: {why}"
    if name == "inductor":
        torch_built, triton_built = inductor_parts(built)
        torch_have, triton_have = inductor_parts(have)
        wrong = [
            f"{what} {b} != installed {h}"
            for what, b, h in (
                ("torch", torch_built, torch_have),
                ("Triton", triton_built, triton_have),
                ("CUDA", offer.cuda, installed.cuda),
            )
            if b != h
        ]
        if wrong:
            return f"built with {', '.join(wrong)}: an Inductor engine needs the same torch, Triton and CUDA"
        return None
    if name == "onnxruntime":
        if release(_bare(built))[:2] == release(_bare(have))[:2]:
            return None
        return f"built by {built}, installed {have}: an ONNX Runtime engine needs the same major.minor version"
    return None if built == have else f"built by {built}, installed {have}: the versions differ"


def gpu_match(offer: Offer, consumer: Consumer) -> int | None:
    """How closely the offer's GPU matches the consumer's (SAME_PRODUCT ... HARDWARE_COMPATIBLE);
    None when the engine is not for this GPU."""
    products = catalog_products(consumer.gpu_product)
    if offer.gpu_product == products[0]:
        return SAME_PRODUCT
    if offer.gpu_product in products:
        return SAME_HARDWARE
    if offer.compiler != "tensorrt":
        return None
    mine, theirs = _cc(consumer.compute_capability), _cc(offer.compute_capability)
    if mine and theirs and mine == theirs:
        return SAME_COMPUTE_CAPABILITY
    if offer.hardware_compatibility_level == 1 and mine and mine >= (8, 0):
        return HARDWARE_COMPATIBLE
    return None


def gpu_problem(offer: Offer, consumer: Consumer) -> str:
    cc = f" (compute capability {offer.compute_capability})" if offer.compute_capability else ""
    return f"built for GPU {offer.gpu_product}{cc}, this GPU is {consumer.gpu_product}"


@dataclass(frozen=True)
class Verdict:
    offer: Offer
    match: int | None  # gpu_match, None when the GPU does not fit
    problems: tuple[str, ...]  # empty: compatible

    @property
    def ok(self) -> bool:
        return not self.problems


def driver_fits(offer: Offer, consumer: Consumer) -> bool:
    """Whether the offer was measured on the consumer's driver major (True when the consumer's is not
    known: nothing to prefer)."""
    return consumer.driver_major is None or offer.driver_major == consumer.driver_major


def judge(offer: Offer, consumer: Consumer, require_validated: bool = False, same_driver: bool = False) -> Verdict:
    """Every reason the consumer cannot use this offer (none: it can); `same_driver`: an engine
    measured on another driver major (or on one not recorded) does not fit either."""
    problems = []
    match = gpu_match(offer, consumer)
    if match is None:
        problems.append(gpu_problem(offer, consumer))
    version = version_problem(offer, consumer.compilers.get(offer.compiler))
    if version:
        problems.append(version)
    if require_validated and offer.accuracy_validated is not True:
        problems.append(
            "its accuracy was not validated (spec.accuracy.disabled)"
            if offer.accuracy_validated is False
            else "its provenance does not say accuracy was validated"
        )
    if same_driver and not driver_fits(offer, consumer):
        problems.append(
            f"measured on driver major {offer.driver_major or '(not recorded)'}, this machine's is "
            f"{consumer.driver_major} (--same-driver)"
        )
    return Verdict(offer, match, tuple(problems))


class NotInCatalog(LookupError):
    """The catalog has no entry to choose from (no such model, or no such pinned run)."""


class NoCompatibleEngine(LookupError):
    """The catalog has entries, none of which this consumer may run; the message lists them."""


@dataclass(frozen=True)
class Selection:
    offer: Offer
    how: str  # why this one, in words
    verdicts: tuple[Verdict, ...]  # every offer considered


def select(
    offers: list[Offer],
    consumer: Consumer,
    *,
    model: str,
    prefer: str = NEWEST,
    run_uid: str | None = None,
    require_validated: bool = False,
    same_driver: bool = False,
) -> Selection:
    """The engine to hand over: among the compatible offers (of the pinned run, when given), the
    closest GPU match, then those measured on the consumer's driver major (the others when none is,
    and `how` says so), then the newest or the best speedup. A superseded entry is chosen like any
    other: for its own stack it is the one that fits. Raises NotInCatalog or NoCompatibleEngine."""
    if prefer not in (NEWEST, SPEEDUP):
        raise ValueError(f"prefer must be {NEWEST!r} or {SPEEDUP!r} (got {prefer!r})")
    if not offers:
        raise NotInCatalog(f"the catalog has no engine for model {model!r}")
    if run_uid:
        pinned = [o for o in offers if o.run_uid == run_uid or o.run_uid.startswith(run_uid)]
        if not pinned:
            runs = ", ".join(sorted({f"{o.run_uid} ({o.run})" for o in offers}))
            raise NotInCatalog(f"model {model!r} has no engine from run {run_uid!r}; its runs: {runs}")
        offers = pinned
    verdicts = [judge(o, consumer, require_validated, same_driver) for o in offers]
    fitting = [v for v in verdicts if v.ok]
    if not fitting:
        raise NoCompatibleEngine(refusal(model, consumer, verdicts))

    def newest(v: Verdict):
        return v.offer.published_at, v.offer.run_uid

    def fastest(v: Verdict):
        return (v.offer.speedup if v.offer.speedup is not None else float("-inf")), *newest(v)

    best_match = min(v.match for v in fitting if v.match is not None)  # (every fitting one has a match)
    closest = [v for v in fitting if v.match == best_match]
    on_driver = [v for v in closest if driver_fits(v.offer, consumer)]
    pool = on_driver or closest
    chosen = max(pool, key=fastest if prefer == SPEEDUP else newest)
    rule = "pinned run" if run_uid else "best speedup" if prefer == SPEEDUP else "newest"
    driver = f" on driver major {consumer.driver_major}" if consumer.driver_major and on_driver else ""
    how = f"{rule} of {len(pool)} compatible engine(s) for {GPU_MATCH_WORDS[best_match]}{driver}" + (
        f" ({len(fitting) - len(closest)} more match less closely)" if len(fitting) > len(closest) else ""
    )
    if not on_driver:
        recorded = sorted({v.offer.driver_major or "not recorded" for v in closest})
        how += (
            f"; no compatible engine was measured on driver major {consumer.driver_major} (those that fit: "
            f"driver {', '.join(recorded)}): it may run, but was not measured on this stack — publish a "
            f"run on this driver, or pass --same-driver to refuse"
        )
    if chosen.offer.superseded_by:
        how += f"; superseded by {chosen.offer.superseded_by}, still the engine for its own stack"
    return Selection(chosen.offer, how, tuple(verdicts))


def refusal(model: str, consumer: Consumer, verdicts: list[Verdict]) -> str:
    """What was found and what the catalog offers, one line per offer with why it does not fit."""
    lines = [
        f"no compatible engine for model {model!r} in the catalog",
        f"  found: {consumer.describe()}",
        "  the catalog offers:",
    ]
    for v in sorted(verdicts, key=lambda v: (v.offer.gpu_product, v.offer.compiler_version, v.offer.published_at)):
        lines.append(f"    {v.offer.describe()}: {'; '.join(v.problems) or 'compatible'}")
    return "\n".join(lines)
