#!/usr/bin/env bash
# End-to-end suite driver: kind cluster -> images -> deploy -> cargo test the scenarios -> tear down.
#
#   e2e/run.sh                        single-node cluster, every scenario
#   KIND_CONFIG=multi-node e2e/run.sh three zone-labelled workers (mock zones pinned to their node)
#   e2e/run.sh rollout_happy_case     only the scenarios whose name contains the filter (cargo test filter)
#
# Needs: docker (with buildx for multi-platform builds; a plain local build is enough here), kind, kubectl,
# cargo. Environment: KIND_CONFIG (single-node|multi-node), KIND_NODE_IMAGE (e.g. kindest/node:v1.33.1),
# CLUSTER_NAME, KEEP_CLUSTER=1 (do not delete the cluster afterwards, to debug; reuse it with REUSE_CLUSTER=1).
set -euo pipefail
cd "$(dirname "$0")/.."

kind_config=${KIND_CONFIG:-single-node}
cluster=${CLUSTER_NAME:-rollout-operator-e2e}
operator_image=rollout-operator:e2e
mock_image=rollout-e2e-mock-pod:e2e
namespace=rollout-operator

for tool in docker kind kubectl cargo; do
  command -v "$tool" >/dev/null || { echo "e2e/run.sh: $tool not found on PATH" >&2; exit 2; }
done

kubeconfig=$(mktemp)
cleanup() {
  status=$?
  if [[ $status -ne 0 ]]; then
    echo "--- operator logs ---" >&2
    KUBECONFIG=$kubeconfig kubectl -n "$namespace" logs deploy/rollout-operator --tail=200 >&2 || true
  fi
  if [[ -z ${KEEP_CLUSTER:-} ]]; then
    kind delete cluster --name "$cluster" >/dev/null 2>&1 || true
    rm -f "$kubeconfig"
  else
    echo "kept cluster $cluster; KUBECONFIG=$kubeconfig" >&2
  fi
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "==> kind cluster $cluster (kind-configs/$kind_config.yaml)"
if [[ -n ${REUSE_CLUSTER:-} ]] && kind get clusters | grep -qx "$cluster"; then
  kind get kubeconfig --name "$cluster" >"$kubeconfig"
else
  kind delete cluster --name "$cluster" >/dev/null 2>&1 || true
  kind create cluster --name "$cluster" --config "kind-configs/$kind_config.yaml" --kubeconfig "$kubeconfig" \
    --wait 5m ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"}
fi
export KUBECONFIG=$kubeconfig

echo "==> images"
docker build -t "$operator_image" .
docker build --target mock-pod -t "$mock_image" .
kind load docker-image --name "$cluster" "$operator_image" "$mock_image"

echo "==> deploy (deploy/overlays/e2e)"
kubectl apply -k deploy/overlays/e2e
kubectl -n "$namespace" rollout status deploy/rollout-operator --timeout=5m

echo "==> scenarios"
E2E_NAMESPACE=$namespace E2E_MOCK_IMAGE=$mock_image \
  cargo test -p rollout-e2e --test e2e -- --ignored --test-threads=1 "$@"
