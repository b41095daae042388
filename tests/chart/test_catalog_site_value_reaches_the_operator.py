"""`store.catalogSite` (default true) reaches the operator as ENGINEWRIGHT_CATALOG_SITE, read as its
settings read it; the schema refuses what is not a boolean."""

from __future__ import annotations

from tests.chart.chart import CHART, by_kind, helm, render

STORE = {"store.endpoint": "minio.minio.svc:9000"}


def site_setting(cluster, values: dict) -> bool:
    from enginewright.controller.settings import Settings

    (deployment,) = by_kind(render(cluster, "ew", "enginewright", {**STORE, **values}), "Deployment")
    env = {e["name"]: e.get("value", "") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "ENGINEWRIGHT_CATALOG_SITE" in env
    return Settings.from_env({k: v for k, v in env.items() if k.startswith("ENGINEWRIGHT_")}).catalog_site


def test_the_catalog_site_is_on_by_default_and_can_be_turned_off(cluster):
    assert site_setting(cluster, {}) is True
    assert site_setting(cluster, {"store.catalogSite": False}) is False
    refused = helm(
        cluster,
        "template",
        "r",
        str(CHART),
        '--set-json=store.endpoint="m:9000"',
        '--set-json=store.catalogSite="yes"',
        check=False,
    )
    assert refused.returncode != 0 and "catalogSite" in refused.stderr, refused.stderr
