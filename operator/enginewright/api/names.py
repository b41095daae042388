"""Names used on the wire, defined once: API group, kinds, labels, annotations, object keys."""

GROUP = "tuning.enginewright.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TuningRun"
PLURAL = "tuningruns"
SINGULAR = "tuningrun"
SHORT_NAMES = ["trun"]
CRD_NAME = f"{PLURAL}.{GROUP}"

# Node label that carries the GPU type; an operator setting, this is its default.
DEFAULT_GPU_TYPE_LABEL = "nvidia.com/gpu.product"
GPU_RESOURCE = "nvidia.com/gpu"

LABEL_RUN = f"{GROUP}/run"
LABEL_TARGET = f"{GROUP}/target"
LABEL_STAGE = f"{GROUP}/stage"
LABEL_COMPONENT = f"{GROUP}/component"
LABEL_BATCH = f"{GROUP}/batch"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "enginewright"
ANNOTATION_SPEC_HASH = f"{GROUP}/spec-hash"
ANNOTATION_SHARD = f"{GROUP}/shard"  # a cache ConfigMap's place in its target's shards
FINALIZER = f"{GROUP}/finalizer"

# Keys of the store-credentials Secret that worker pods read (in the run's namespace).
SECRET_ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
SECRET_SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"

# The re-tuning policy (api/policy.py): it owns TuningRuns it starts when a target's stack changes.
POLICY_KIND = "TuningPolicy"
POLICY_PLURAL = "tuningpolicies"
POLICY_SINGULAR = "tuningpolicy"
POLICY_SHORT_NAMES = ["tpol"]
POLICY_CRD_NAME = f"{POLICY_PLURAL}.{GROUP}"
LABEL_POLICY = f"{GROUP}/policy"  # on a TuningRun a policy started: the policy's name
# Node label GPU feature discovery sets to the CUDA driver's major version.
DRIVER_MAJOR_LABEL = "nvidia.com/cuda.driver.major"
