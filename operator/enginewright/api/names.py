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
