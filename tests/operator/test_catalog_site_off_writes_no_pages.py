"""With the catalog site turned off (ENGINEWRIGHT_CATALOG_SITE=false, Helm store.catalogSite: false)
a run publishes its engine, provenance and routes as always, and no page is written."""

from __future__ import annotations

import uuid

from minio.error import S3Error

from enginewright.store.layout import CATALOG, site_page
from tests.cluster.operator_process import create_store_secret, start_operator
from tests.operator.conftest import RUNS_BUCKET, TEST_INTERVAL, apply, manifest, wait_condition


def test_no_site_pages_when_the_setting_is_off(cluster, crd_installed, example_in_store, s3, tmp_path):
    namespace = f"s-{uuid.uuid4().hex[:8]}"  # watched by this test's operator only (the shared one watches t-*)
    cluster.kubectl("create", "namespace", namespace)
    create_store_secret(cluster, namespace)
    model = f"site-off-{uuid.uuid4().hex[:6]}"
    operator = start_operator(
        cluster,
        tmp_path / "operator.log",
        RUNS_BUCKET,
        ENGINEWRIGHT_NAMESPACES=namespace,
        ENGINEWRIGHT_RECONCILE_INTERVAL=TEST_INTERVAL,
        ENGINEWRIGHT_CATALOG_SITE="false",
    )
    try:
        apply(
            cluster,
            namespace,
            manifest("off", knobs=[{"name": "enable_mem_pattern", "values": ["0"]}], publish={"modelName": model}),
        )
        status = wait_condition(cluster, namespace, "off", "Ready", 300)
        (target,) = status["targets"]
        assert target["engineUri"].startswith(f"s3://{RUNS_BUCKET}/{CATALOG}/{model}/")
        s3.stat_object(RUNS_BUCKET, f"{CATALOG}/{model}/index.json")  # published
        try:
            s3.stat_object(RUNS_BUCKET, f"{CATALOG}/{site_page(model)}")
            raise AssertionError(f"{CATALOG}/{site_page(model)} was written with the site off")
        except S3Error as exc:
            assert exc.code in ("NoSuchKey", "NotFound"), exc
        assert "catalog site: wrote" not in operator.log_text()
    finally:
        operator.stop()
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")
    assert "Traceback" not in operator.log_text()
