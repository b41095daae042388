"""Does the data fit the model? Reference inputs and reference outputs checked against the model's
signature (names, dtypes, shapes) before anything is built. Pure: it reads `.shape` and `.dtype`.

One function, `mismatches`, used by the probe (`worker/job.py`: a bad file stalls the run with
`InvalidInput` naming the tensor, before any tuning Job) and by `enginewright tune` (`cli/tune.py`:
it stops before building and says what the model expects).

Rules, per reference pair:
- inputs: exactly the model's inputs, each of the declared dtype (any floating dtype when the backend
  casts floating inputs itself) and rank, fixed sizes equal, a named dynamic size the same wherever it
  appears in the pair;
- references: one tensor for every output that is checked (every model output, or the explicit
  `outputs` list), no tensor the model does not produce, numeric, and of the output's declared rank and
  sizes, named dynamic sizes as the pair's inputs bound them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

Dim = int | str | None  # fixed size, a named dynamic size, or any size
MOST_SAID = 6  # mismatches listed in one message; the rest are counted


@dataclass(frozen=True)
class TensorSpec:
    """One declared input or output. `dtype`: a numpy dtype name (None: not declared); `shape`: None
    when the rank is not declared."""

    name: str
    dtype: str | None = None
    shape: tuple[Dim, ...] | None = None

    def describe(self) -> str:
        dims = "?" if self.shape is None else ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name} {self.dtype or 'any'}[{dims}]"


@dataclass(frozen=True)
class Signature:
    """What a model takes and gives. `casts_inputs`: the backend casts floating inputs to its own dtype
    (Inductor with the input_dtype setting), so any floating input dtype fits a floating input."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    casts_inputs: bool = False

    def describe(self) -> str:
        return (
            f"the model takes {', '.join(t.describe() for t in self.inputs) or 'no inputs'} and gives "
            f"{', '.join(t.describe() for t in self.outputs) or 'no outputs'}"
        )


@dataclass(frozen=True)
class PairData:
    """One reference pair: its arrays by name, and how to name each file in a message."""

    inputs_label: str
    inputs: Mapping[str, Any]
    references_label: str | None = None
    references: Mapping[str, Any] | None = None  # None: accuracy is not checked


def _kind(dtype) -> str:
    return getattr(dtype, "kind", "")


def _shape_problem(
    spec: TensorSpec, shape: tuple[int, ...], bound: dict[str, tuple[int, str]], label: str, what: str
) -> str | None:
    """Why `shape` does not fit `spec` (None: it fits); binds the named sizes it meets first."""
    if spec.shape is None:
        return None
    if len(shape) != len(spec.shape):
        return (
            f"{label}: {what} {spec.name!r} has shape {list(shape)} (rank {len(shape)}); the model declares "
            f"{spec.describe()} (rank {len(spec.shape)})"
        )
    for axis, (dim, size) in enumerate(zip(spec.shape, shape)):
        if isinstance(dim, int) and dim != size:
            return (
                f"{label}: {what} {spec.name!r} has shape {list(shape)}; the model declares "
                f"{spec.describe()} (dimension {axis} must be {dim})"
            )
        if isinstance(dim, str):
            if dim in bound and bound[dim][0] != size:
                size_was, where = bound[dim]
                return (
                    f"{label}: {what} {spec.name!r} has shape {list(shape)}; the model declares "
                    f"{spec.describe()}, and {dim} is {size_was} in {where}"
                )
            bound.setdefault(dim, (size, f"{what} {spec.name!r}"))
    return None


def mismatches(signature: Signature, pairs: Sequence[PairData], outputs: Sequence[str] = ()) -> list[str]:
    """Every way the pairs do not fit the model, one sentence each naming the file and the tensor
    (empty: they fit). `outputs`: the outputs accuracy is checked on (empty: every model output)."""
    found: list[str] = []
    declared_in = {t.name: t for t in signature.inputs}
    declared_out = {t.name: t for t in signature.outputs}
    unknown = [name for name in outputs if name not in declared_out]
    if unknown:
        found.append(
            f"spec.accuracy.outputs names {unknown}, which the model does not give (its outputs: "
            f"{sorted(declared_out)})"
        )
    checked = [name for name in (outputs or list(declared_out)) if name in declared_out]
    for pair in pairs:
        bound: dict[str, tuple[int, str]] = {}
        names = set(pair.inputs)
        missing, extra = [n for n in declared_in if n not in names], sorted(names - set(declared_in))
        if missing:
            found.append(
                f"{pair.inputs_label}: no input {', '.join(map(repr, missing))} "
                f"({'; '.join(declared_in[n].describe() for n in missing)})"
            )
        if extra:
            found.append(
                f"{pair.inputs_label}: {', '.join(map(repr, extra))} is not an input of the model "
                f"(its inputs: {sorted(declared_in)})"
            )
        for name, spec in declared_in.items():
            if name not in names:
                continue
            array = pair.inputs[name]
            dtype = str(array.dtype)
            floats = _kind(array.dtype) == "f" and (spec.dtype or "").startswith(("float", "bfloat"))
            if spec.dtype and dtype != spec.dtype and not (signature.casts_inputs and floats):
                found.append(f"{pair.inputs_label}: input {name!r} is {dtype}; the model declares {spec.describe()}")
            problem = _shape_problem(spec, tuple(array.shape), bound, pair.inputs_label, "input")
            if problem:
                found.append(problem)
        if pair.references is None:
            continue
        label = pair.references_label or "references"
        given = set(pair.references)
        absent = [n for n in checked if n not in given]
        if absent:
            found.append(
                f"{label}: no reference for output {', '.join(map(repr, absent))}: every output that is "
                f"checked needs one (or name the outputs to check in spec.accuracy.outputs; "
                f"enginewright tune: --output)"
            )
        strange = sorted(given - set(declared_out))
        if strange:
            found.append(
                f"{label}: {', '.join(map(repr, strange))} is not an output of the model (its outputs: "
                f"{sorted(declared_out)})"
            )
        for name in checked:
            if name not in given:
                continue
            array = pair.references[name]
            if _kind(array.dtype) not in ("f", "i", "u", "b"):
                found.append(f"{label}: reference {name!r} is {array.dtype}, not a number type")
                continue
            problem = _shape_problem(declared_out[name], tuple(array.shape), bound, label, "reference")
            if problem:
                found.append(problem)
    return found


def summary(found: Sequence[str], signature: Signature) -> str:
    """One message for a condition or a terminal: the first mismatches, how many more, what the model
    expects."""
    said = "; ".join(found[:MOST_SAID])
    more = f" (and {len(found) - MOST_SAID} more)" if len(found) > MOST_SAID else ""
    return f"{said}{more}. Expected: {signature.describe()}"
