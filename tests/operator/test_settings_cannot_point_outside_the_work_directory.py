"""A compiler setting that is a file name (ONNX Runtime's
session.optimized_model_external_initializers_file_name wrote 9.5 MB at ../../x) cannot leave the
worker's work directory: the API server refuses the manifest at apply, naming the setting."""

import json
import subprocess

import pytest

from tests.operator.conftest import manifest

KEY = "session.optimized_model_external_initializers_file_name"


@pytest.mark.parametrize("value", ["../../x", "/tmp/outside", "~/x", "weights/../../x"])
def test_a_path_out_of_the_work_directory_is_refused_at_apply(cluster, crd_installed, namespace, value):
    doc = manifest("escape")
    doc["spec"]["compiler"]["settings"] = {KEY: value, "intra_op_num_threads": "1"}
    done = subprocess.run(
        [str(cluster.binaries / "kubectl"), "apply", "-n", namespace, "-f", "-"],
        input=json.dumps(doc),
        env=cluster.env,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0, done.stdout
    assert "spec.compiler.settings" in done.stderr and KEY in done.stderr, done.stderr
    assert "intra_op_num_threads" not in done.stderr  # only the offending setting is named
    assert cluster.kubectl("get", "trun", "-n", namespace, "-o", "name").stdout.strip() == ""
