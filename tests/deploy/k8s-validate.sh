#!/usr/bin/env bash
# k8s-validate.sh [VENV]: every manifest of deploy/k8s passes yamllint
# (deploy/k8s/.yamllint) and kubernetes-validate against the schemas of
# the newest Kubernetes release it knows (both from PyPI, in a venv:
# default build-container/venv-k8s). The ServiceMonitor is a custom
# resource with no schema there: checked by yamllint only and for its
# apiVersion and kind.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
venv=${1:-$top/build-container/venv-k8s}
if [ ! -x "$venv/bin/kubernetes-validate" ] || [ ! -x "$venv/bin/yamllint" ]; then
	python3 -m venv "$venv"
	"$venv/bin/pip" install --quiet --disable-pip-version-check \
		kubernetes-validate yamllint pyyaml
fi
cd "$top/deploy/k8s"
"$venv/bin/yamllint" --strict -c .yamllint .
echo "yamllint: ok ($(ls ./*.yaml | wc -l) files)"
version=$("$venv/bin/python" -c '
import kubernetes_validate.utils as u
print(u.latest_version())')
core=()
for f in ./*.yaml; do
	grep -q '^kind: ServiceMonitor' "$f" || core+=("$f")
done
"$venv/bin/kubernetes-validate" --strict -k "$version" "${core[@]}"
grep -q '^apiVersion: monitoring.coreos.com/v1$' servicemonitor.yaml
echo "kubernetes-validate $version: ok (${#core[@]} files; servicemonitor.yaml: CRD, yamllint only)"
