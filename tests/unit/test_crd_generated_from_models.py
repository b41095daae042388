"""crds/ is generated from the pydantic models; a drift or a non-structural schema fails here."""

from pathlib import Path

import yaml

from enginewright.api.crd import render_crds

FORBIDDEN = {"anyOf", "oneOf", "allOf", "$ref", "$defs", "const", "title"}


def walk(node, path="schema"):
    if isinstance(node, dict):
        for key, value in node.items():
            yield path, key, value
            yield from walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from walk(item, f"{path}[{i}]")


def test_committed_crds_match_the_models():
    # The Helm chart installs its own copy: a copy left behind installs an older schema (session 12's
    # spec.search.routes reached crds/ but not the chart, and only the 35-minute chart test saw it).
    for folder in (Path("crds"), Path("charts/enginewright/crds")):
        for name, text in render_crds().items():
            committed = folder / name
            assert committed.exists(), f"{committed} missing: run `make crds`"
            assert committed.read_text() == text, f"{committed} drifted from the models: run `make crds`"


def test_schema_is_structural_typed_and_described():
    crd = yaml.safe_load(next(iter(render_crds().values())))
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, key, value in walk(schema):
        assert key not in FORBIDDEN, f"{path} has {key}"
        if key == "properties":
            for prop, sub in value.items():
                assert "type" in sub, f"{path}.{prop} has no type"
    spec = schema["properties"]["spec"]
    assert spec["properties"]["accuracy"]["properties"]["threshold"]["exclusiveMinimum"] is True
    assert spec["properties"]["search"]["properties"]["mode"]["enum"] == ["fast", "full", "mixed"]
    assert spec["properties"]["search"]["properties"]["mode"]["default"] == "fast"
    assert spec["properties"]["search"]["properties"]["mode"]["description"]
    rules = [r["rule"] for r in spec["properties"]["search"]["x-kubernetes-validations"]]
    assert any("dryRun" in r and "mixed" in r for r in rules)
    columns = {c["name"]: c for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert list(columns) == ["Phase", "Ready", "Reason", "Progress", "Speedup", "Age"]
    # A stalled run reads "Pending"; Ready (and, with -o wide, its reason) says what is going on.
    assert columns["Ready"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Reason"]["priority"] == 1 and "Ready" in columns["Reason"]["jsonPath"]
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_every_status_field_is_described():
    """`kubectl explain tuningrun.status` explains every field a user reads."""
    crd = yaml.safe_load(next(iter(render_crds().values())))
    status = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    bare = [
        f"{path}.{prop}"
        for path, key, value in walk(status, "status")
        if key == "properties"
        for prop, sub in value.items()
        if not sub.get("description")
    ]
    assert bare == [], bare


def test_the_policy_crd_is_structural_described_and_its_template_editable():
    """The TuningPolicy CRD comes from the same models: its template is the TuningRun spec's schema
    less the immutability rule (a run's spec is immutable, a policy's template is not)."""
    texts = render_crds()
    assert list(texts)[0] == "tuningruns.tuning.enginewright.io.yaml"  # the run's CRD stays first
    run, policy = (yaml.safe_load(texts[name]) for name in texts)
    assert policy["spec"]["names"]["kind"] == "TuningPolicy" and policy["spec"]["scope"] == "Namespaced"
    schema = policy["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, key, value in walk(schema):
        assert key not in FORBIDDEN, f"{path} has {key}"
        if key == "properties":
            for prop, sub in value.items():
                assert "type" in sub, f"{path}.{prop} has no type"
                assert (
                    path.startswith("schema.properties.spec.properties.template")
                    or sub.get("description")
                    or (path == "schema" and prop in ("apiVersion", "kind", "metadata"))
                ), f"{path}.{prop} has no description"
    template = schema["properties"]["spec"]["properties"]["template"]
    run_spec = run["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rules = [r["rule"] for r in template["x-kubernetes-validations"]]
    assert rules and not any("oldSelf" in r for r in rules)
    assert any("oldSelf" in r["rule"] for r in run_spec["x-kubernetes-validations"])  # the run's spec still is
    assert template["properties"] == run_spec["properties"]
    triggers = schema["properties"]["spec"]["properties"]["triggers"]["properties"]
    assert {k: v.get("default") for k, v in triggers.items()} == {
        "driverMajor": True,
        "compilerVersion": True,
        "modelDigest": True,
        "schedule": None,
    }
    schedule = triggers["schedule"]  # a duration of at least an hour, refused at apply otherwise
    assert schedule["type"] == "string" and schedule["pattern"]
    # The minimum is evaluated only for what the pattern lets through (duration() of anything else fails),
    # and not for "" (the pattern matches it; minLength refuses it at apply, but ratchets once stored).
    assert schedule["minLength"] == 2
    assert [r["rule"] for r in schedule["x-kubernetes-validations"]] == [
        f"self.size() < 2 || !self.matches(r'{schedule['pattern']}') || duration(self) >= duration('1h')"
    ]
    assert policy["spec"]["versions"][0]["subresources"] == {"status": {}}
