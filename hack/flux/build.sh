#!/usr/bin/env bash
# build.sh builds Flux's helm-controller and source-controller, from the
# versions pinned in hack/flux/{helm-controller,source-controller}/go.mod,
# into bin/flux/ at the repository root (or $CAPSTAN_BIN_DIR/flux), with
# their CRDs, taken from each module's own config/crd/bases, in
# bin/flux/crds/. BenchmarkAgainstFlux runs them beside Capstan; `make flux`
# calls this, and `make bench-flux` before the benchmark. Nothing else
# builds or needs Flux, so `make bin` and `make test` do not.
#
# A stamp (bin/.flux-stamp) holds a hash of both modules' go.mod and go.sum,
# of `go version` and of this script; when it matches and every file is
# present, nothing is rebuilt. The stamp is written only after a successful
# build. A cold build takes a few minutes on 2 cores.
set -euo pipefail

script="${BASH_SOURCE[0]}"
[[ "$script" == */* ]] || script="./$script"
root="$(cd "${script%/*}/../.." && pwd)"
modules="$root/hack/flux"
bin="${CAPSTAN_BIN_DIR:-$root/bin}"
out="$bin/flux"
stamp="$bin/.flux-stamp"
controllers=(helm-controller source-controller)

mkdir -p "$bin"
exec 9>"$bin/.flux.lock"
flock 9

want="$({
	go version
	cat "$modules"/{helm-controller,source-controller}/go.{mod,sum} "$script"
} | sha256sum | cut -d' ' -f1)"

up_to_date() {
	[[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] || return 1
	local c
	for c in "${controllers[@]}"; do
		[[ -x "$out/$c" ]] || return 1
	done
	compgen -G "$out/crds/*.yaml" >/dev/null
}

if up_to_date; then
	echo "flux: up to date in $out (stamp $stamp)"
	exit 0
fi

rm -f "$stamp"
staging="$(mktemp -d "$bin/.flux-build.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/crds"

started=$SECONDS
for c in "${controllers[@]}"; do
	module="github.com/fluxcd/$c"
	version="$(cd "$modules/$c" && go list -m -f '{{.Version}}' "$module")"
	echo "flux: building $c $version ($((SECONDS - started))s elapsed)"
	# The main package is the module's root. No -trimpath, as in
	# build-controlplane.sh, so the Go build cache of an earlier build is
	# reused.
	(cd "$modules/$c" && go build -ldflags="-s -w" -o "$staging/$c" "$module")
	dir="$(cd "$modules/$c" && go list -m -f '{{.Dir}}' "$module")"
	cp "$dir"/config/crd/bases/*.yaml "$staging/crds/"
	echo "$version" >"$staging/$c.version"
done

rm -rf "$out"
mv "$staging" "$out"
chmod 755 "$out"
trap - EXIT
echo "$want" >"$stamp"
echo "flux: built ${controllers[*]} and $(ls "$out/crds" | wc -l) CRDs into $out ($((SECONDS - started))s)"
