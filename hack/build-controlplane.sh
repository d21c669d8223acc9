#!/usr/bin/env bash
# build-controlplane.sh builds the local control plane that tests and
# `capstan dev` run on: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok, from the pinned modules under hack/controlplane/,
# into bin/ at the repository root, or into $CAPSTAN_BIN_DIR (which every
# make target honours). It works from any directory.
#
# A stamp (bin/.controlplane-stamp) holds a hash of the three modules' go.mod
# and go.sum, of `go version` and of this script. When the stamp matches and
# every binary is present, nothing is rebuilt. The stamp is removed before a
# rebuild starts and written only after every binary was built, so a partial
# or failed build never leaves one behind.
#
# A cold build takes about 10 minutes on 2 cores; kube-apiserver is most of it.
set -euo pipefail

script="${BASH_SOURCE[0]}"
[[ "$script" == */* ]] || script="./$script"
root="$(cd "${script%/*}/.." && pwd)"
bin="${CAPSTAN_BIN_DIR:-$root/bin}"
modules="$root/hack/controlplane"
stamp="$bin/.controlplane-stamp"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)

[[ -d "$bin" ]] || mkdir -p "$bin"

# NOTE: two builds at once (two terminals, or make -j) would race on the same
# outputs; the second waits for the first and then finds the stamp current.
exec 9>"$bin/.controlplane.lock"
flock 9

# The no-op path runs on every `make bin`, so it forks little: one go, one
# cat, one sha256sum.
read -r want _ < <(
	{
		go version
		cat "$modules"/{etcd,kubernetes,kwok}/go.{mod,sum} "$script"
	} | sha256sum
)

up_to_date() {
	local have=""
	[[ -f "$stamp" ]] && read -r have <"$stamp"
	[[ "$have" == "$want" ]] || return 1
	local b
	for b in "${binaries[@]}"; do
		[[ -x "$bin/$b" ]] || return 1
	done
}

if up_to_date; then
	echo "control plane: up to date in $bin (stamp $stamp)"
	exit 0
fi

rm -f "$stamp"
staging="$(mktemp -d "$bin/.build.XXXXXX")"
finish() {
	local rc=$?
	rm -rf "$staging"
	if ((rc != 0)); then
		echo "control plane: build failed (exit $rc); no stamp was written, so the next run builds again" >&2
	fi
}
trap finish EXIT

started=$SECONDS
step() {
	echo "control plane: $* ($((SECONDS - started))s elapsed)"
}

# version_of prints the version that module $1 requires of module path $2.
version_of() {
	(cd "$modules/$1" && go list -m -f '{{.Version}}' "$2")
}

etcd_version="$(version_of etcd go.etcd.io/etcd/server/v3)"
kube_version="$(version_of kubernetes k8s.io/kubernetes)"
kwok_version="$(version_of kwok sigs.k8s.io/kwok)"

# Kubernetes reports its version from these variables (as its own
# hack/lib/version.sh sets them); without them /version says v0.0.0-master and
# Helm charts with a kubeVersion constraint refuse to render against it.
kube_major="${kube_version#v}"
kube_major="${kube_major%%.*}"
kube_minor="${kube_version#v*.}"
kube_minor="${kube_minor%%.*}"
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	kube_ldflags+=" -X $pkg.gitVersion=$kube_version"
	kube_ldflags+=" -X $pkg.gitMajor=$kube_major"
	kube_ldflags+=" -X $pkg.gitMinor=$kube_minor"
	kube_ldflags+=" -X $pkg.gitTreeState=clean"
done

# NOTE: no -trimpath: it changes every compile action, so the Go build cache
# filled by an earlier plain `go build` would not be reused.
step "building etcd $etcd_version"
(cd "$modules/etcd" && go build -ldflags="-s -w" -o "$staging/etcd" .)

step "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl $kube_version (about 10 minutes cold)"
(cd "$modules/kubernetes" && go build -ldflags="$kube_ldflags" -o "$staging/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler \
	k8s.io/kubernetes/cmd/kubectl)

step "building kwok $kwok_version"
(cd "$modules/kwok" && go build -ldflags="-s -w" -o "$staging/kwok" sigs.k8s.io/kwok/cmd/kwok)

for b in "${binaries[@]}"; do
	mv -f "$staging/$b" "$bin/$b"
done
echo "$want" >"$stamp"
step "built ${binaries[*]} into $bin"
