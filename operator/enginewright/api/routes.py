"""Knobs and routes: the compiler's option list, canonical route strings and stable route ids."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Knob:
    """One compiler option a route can set.

    `values` is None for an open-ended knob (an integer, or a list ending in '...'): any value is
    allowed, and it is swept with the values the user gives, or by default with its `suggested` ones
    (ONNX Runtime's thread counts, from the worker's cores) when it has them. An `exclusive` knob's other values make the rest of the route
    meaningless (Inductor's `compile=false` runs the program eagerly, ignoring every option), so planners
    never combine them with other changed knobs.
    """

    name: str
    values: tuple[str, ...] | None
    default: str
    help: str = ""
    exclusive: bool = False
    suggested: tuple[str, ...] | None = None  # an open-ended knob's values swept when none are given

    @property
    def sweepable(self) -> bool:
        return self.values is not None or self.suggested is not None

    @property
    def default_sweep(self) -> tuple[str, ...]:
        """The values the default space sweeps: the allowed ones, else the suggested ones."""
        return self.values if self.values is not None else (self.suggested or ())


@dataclass(frozen=True)
class Route:
    """A set of knob settings; `knobs` holds only settings that differ from what the default route is
    built with (the knobs' defaults, a base setting naming a knob in place of its default)."""

    knobs: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, knobs: dict[str, str], defaults: dict[str, str] | None = None) -> Route:
        """The route of `knobs`, dropping each value equal to its knob's entry in `defaults`: the values
        the default route is built with (the planners pass `search.planners.as_built` defaults)."""
        defaults = defaults or {}
        return cls(tuple(sorted((k, v) for k, v in knobs.items() if defaults.get(k) != v)))

    @property
    def canonical(self) -> str:
        return canonical_route(dict(self.knobs))

    @property
    def id(self) -> str:
        return route_id(self.canonical)

    @property
    def as_dict(self) -> dict[str, str]:
        return dict(self.knobs)

    def __str__(self) -> str:
        return self.canonical or "(default)"


def canonical_route(knobs: dict[str, str]) -> str:
    """`-a=x -b=y`, sorted by knob name: one string per route, however it was written."""
    return " ".join(f"-{name}={value}" for name, value in sorted(knobs.items()))


def route_id(canonical: str) -> str:
    """Stable 12-hex id of a canonical route string (the default route is '' and has an id too)."""
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def parse_route(text: str) -> dict[str, str]:
    """Parse a route string (`-k1=v1 -k2=v2`, tokens in any order) into knob -> value."""
    knobs: dict[str, str] = {}
    for token in text.split():
        if not token.startswith("-") or "=" not in token:
            raise ValueError(f"route token {token!r} is not of the form -knob=value")
        name, value = token[1:].split("=", 1)
        if not name or not value:
            raise ValueError(f"route token {token!r} has an empty knob name or value")
        if name in knobs and knobs[name] != value:
            raise ValueError(f"route sets knob {name!r} twice ({knobs[name]!r} and {value!r})")
        knobs[name] = value
    return knobs


def parse_tensorrt_knobs(all_build_routes: str) -> tuple[str, list[Knob]]:
    """Parse TensorRT's `IBuilderConfig.all_build_routes` JSON into (tuner version, knobs).

    `allowed_values` looks like `-name=[a|b|c]`; `-name=int32_t` or a list ending in `...` is
    open-ended. An empty string means the build-route feature is unavailable.
    """
    if not all_build_routes.strip():
        return "", []
    doc = json.loads(all_build_routes)
    knobs = []
    for option in doc.get("tuner_options", []):
        name = option["option"].lstrip("-")
        allowed = option.get("allowed_values", "")
        spec = allowed.split("=", 1)[1] if "=" in allowed else allowed
        values: tuple[str, ...] | None = None
        if spec.startswith("[") and spec.endswith("]"):
            items = [v.strip() for v in spec[1:-1].split("|") if v.strip()]
            if items and items[-1] != "..." and not any(v.endswith("...") for v in items):
                values = tuple(items)
        knobs.append(
            Knob(name=name, values=values, default=str(option.get("default_value", "")), help=option.get("help", ""))
        )
    return str(doc.get("tuner_version", "")), knobs
