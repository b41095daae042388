"""The locally built control plane and kubectl report the Kubernetes release they are built from
(tests/cluster/build.sh stamps the version with -ldflags -X), so version-checking clients work."""

import json


def test_kubectl_version_reports_v1_34_4_for_client_and_server(cluster):
    result = cluster.kubectl("version", "-o", "json", check=False)
    assert result.returncode == 0, result.stderr  # was: could not parse pre-release/metadata (-master+$Format:%H$)
    versions = json.loads(result.stdout)
    for side in ("clientVersion", "serverVersion"):
        assert versions[side]["gitVersion"] == "v1.34.4", versions
        assert (versions[side]["major"], versions[side]["minor"]) == ("1", "34")
        assert versions[side]["gitTreeState"] == "clean"
        assert "$Format" not in json.dumps(versions[side])


def test_the_api_servers_version_endpoint_reports_v1_34_4(api):
    from kubernetes import client

    info = client.VersionApi(api).get_code()
    assert info.git_version == "v1.34.4" and info.major == "1" and info.minor == "34"
