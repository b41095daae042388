"""Generate the TuningRun and TuningPolicy CustomResourceDefinitions from the pydantic models.

The output is a structural OpenAPI v3 schema: `$ref`s inlined, `Optional[X]` written as X (optional
fields are simply not required), JSON-Schema-2020 bounds translated to the OpenAPI 3.0 dialect the
API server speaks, and `x-kubernetes-validations` (CEL) carried over from the models.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml
from pydantic import BaseModel

from enginewright.api import names
from enginewright.api.models import TuningRunSpec, TuningRunStatus
from enginewright.api.policy import TuningPolicySpec, TuningPolicyStatus

_DROP = {"title", "discriminator"}


def _structural(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_structural(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    if "$ref" in node:
        target = copy.deepcopy(defs[node.pop("$ref").rsplit("/", 1)[-1]])
        target.update(node)  # a field's own description/default wins over the model's
        node = target
    if "anyOf" in node:
        variants = [v for v in node.pop("anyOf") if v.get("type") != "null"]
        if len(variants) != 1:
            raise ValueError(f"not structural: a union of {variants}")
        node = {**variants[0], **node}
        if node.get("default", "x") is None:
            del node["default"]
        return _structural(node, defs)
    if "const" in node:
        node["enum"] = [node.pop("const")]
    for bound, flag in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(node.get(bound), (int, float)) and not isinstance(node.get(bound), bool):
            node[flag] = node.pop(bound)
            node[bound] = True
    if node.get("additionalProperties") is False:
        del node["additionalProperties"]
    elif node.get("additionalProperties") is True:
        del node["additionalProperties"]
        node["x-kubernetes-preserve-unknown-fields"] = True
    if "enum" in node and "type" not in node:
        node["type"] = "string"
    if node.get("type") == "object" and "properties" not in node and "additionalProperties" not in node:
        node["x-kubernetes-preserve-unknown-fields"] = True
    out = {}
    for key, value in node.items():
        if key in _DROP or key == "$defs":
            continue
        if key == "properties":
            out[key] = {k: _structural(v, defs) for k, v in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = _structural(value, defs)
        else:
            out[key] = value
    return out


def _object_defaults(model: type[BaseModel], schema: dict[str, Any]) -> None:
    """Give nested objects built by a default_factory `default: {}`, so the API server fills in
    their own field defaults when a manifest leaves the whole object out."""
    for name, info in model.model_fields.items():
        prop = schema.get("properties", {}).get(info.alias or name)
        if prop is None:
            continue
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            if info.default_factory is not None:
                prop.setdefault("default", {})
            _object_defaults(kind, prop)


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Structural OpenAPI v3 schema of one pydantic model, camelCase field names."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    schema = _structural(raw, raw.get("$defs", {}))
    _object_defaults(model, schema)
    return schema


def _crd(
    name: str,
    kind: str,
    plural: str,
    singular: str,
    short_names: list[str],
    columns: list[dict[str, Any]],
    description: str,
    spec_schema: dict[str, Any],
    status_schema: dict[str, Any],
) -> dict[str, Any]:
    """A namespaced CustomResourceDefinition of the group: one served and stored version, a status
    subresource, the printer columns and the spec/status schemas."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {
            "group": names.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": singular,
                "shortNames": short_names,
                "categories": ["enginewright"],
            },
            "versions": [
                {
                    "name": names.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": description,
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                                "status": status_schema,
                            },
                        }
                    },
                }
            ],
        },
    }


def tuningrun_crd() -> dict[str, Any]:
    """The full CustomResourceDefinition object."""
    return _crd(
        names.CRD_NAME,
        names.KIND,
        names.PLURAL,
        names.SINGULAR,
        names.SHORT_NAMES,
        [
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {
                "name": "Ready",
                "type": "string",
                "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
                "description": "the Ready condition (kstatus)",
            },
            {
                "name": "Reason",
                "type": "string",
                "priority": 1,
                "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
                "description": "why the run is (not) ready, e.g. Unschedulable, ContainerCannotStart, ObjectNotFound",
            },
            {
                "name": "Progress",
                "type": "string",
                "jsonPath": ".status.progress",
                "description": "done/planned routes",
            },
            {
                "name": "Speedup",
                "type": "string",
                "jsonPath": ".status.bestSpeedup",
                "description": "best confirmed speedup over the default route",
            },
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        "A compiler build-route tuning run for one model on one or more GPU types.",
        model_schema(TuningRunSpec),
        model_schema(TuningRunStatus),
    )


def _without_transition_rules(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema less its CEL rules on `oldSelf`: a policy's template is a TuningRun spec that may
    be edited (only a run's spec is immutable)."""
    rules = [r for r in schema.get("x-kubernetes-validations", []) if "oldSelf" not in r["rule"]]
    out = {**schema, "x-kubernetes-validations": rules}
    if not rules:
        del out["x-kubernetes-validations"]
    return out


def tuningpolicy_crd() -> dict[str, Any]:
    """The TuningPolicy CustomResourceDefinition (namespaced, like the runs it starts)."""
    spec_schema = model_schema(TuningPolicySpec)
    spec_schema["properties"]["template"] = _without_transition_rules(spec_schema["properties"]["template"])
    return _crd(
        names.POLICY_CRD_NAME,
        names.POLICY_KIND,
        names.POLICY_PLURAL,
        names.POLICY_SINGULAR,
        names.POLICY_SHORT_NAMES,
        [
            {
                "name": "Ready",
                "type": "string",
                "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
                "description": "the Ready condition (kstatus)",
            },
            {
                "name": "Reason",
                "type": "string",
                "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
                "description": "why the policy is (not) ready",
            },
            {
                "name": "Message",
                "type": "string",
                "priority": 1,
                "jsonPath": ".status.message",
                "description": "the policy's latest news",
            },
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        "Starts a new TuningRun for a target when its stack (driver major, worker image, model digest) changes.",
        spec_schema,
        model_schema(TuningPolicyStatus),
    )


def render_crds() -> dict[str, str]:
    """File name -> YAML text of every generated CRD (what `crds/` must hold), the TuningRun's first."""
    header = "# Generated by `enginewright crds` from operator/enginewright/api/{source}. Do not edit.\n"
    out = {}
    for crd, source in ((tuningrun_crd(), "models.py"), (tuningpolicy_crd(), "policy.py")):
        text = yaml.safe_dump(crd, sort_keys=False, width=100)
        out[f"{crd['metadata']['name']}.yaml"] = header.format(source=source) + text
    return out
