#!/usr/bin/env bash
# build.sh builds the Helm CLI that the rendering tests compare `capstan render`
# against, from the version pinned in hack/helm/go.mod (the same Helm version
# as the main module links), into bin/helm at the repository root, or into
# $CAPSTAN_BIN_DIR. It works from any directory. `make bin` calls it.
#
# A stamp (bin/.helm-stamp) holds a hash of this module's go.mod and go.sum, of
# `go version` and of this script; when it matches and bin/helm exists, nothing
# is rebuilt. The stamp is written only after a successful build.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
module="$root/hack/helm"
bin="${CAPSTAN_BIN_DIR:-$root/bin}"
stamp="$bin/.helm-stamp"

mkdir -p "$bin"
exec 9>"$bin/.helm.lock"
flock 9

want="$({ go version; cat "$module/go.mod" "$module/go.sum" "${BASH_SOURCE[0]}"; } | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$bin/helm" ]]; then
	echo "helm: up to date in $bin (stamp $stamp)"
	exit 0
fi

rm -f "$stamp"
version="$(cd "$module" && go list -m -f '{{.Version}}' helm.sh/helm/v4)"
echo "helm: building $version into $bin/helm"
# NOTE: the ldflags set the version that `helm version` prints and that
# .Capabilities.HelmVersion carries; without them Helm reports only "v4.3",
# which is also what the SDK linked into capstan reports, so the two agree.
(cd "$module" && go build -trimpath -o "$bin/helm.tmp" helm.sh/helm/v4/cmd/helm)
mv "$bin/helm.tmp" "$bin/helm"
echo "$want" >"$stamp"
echo "helm: built $("$bin/helm" version --short)"
