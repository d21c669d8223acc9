#!/usr/bin/env bash
# fetch.sh fetches the chart corpus (hack/charts/corpus.txt) into bin/charts/,
# or into $CAPSTAN_BIN_DIR/charts. Each chart comes from its project's Go
# module on the module proxy, at the version the list pins, so the corpus
# test itself needs no network. It works from any directory; `make charts`
# calls it.
#
# A stamp (bin/charts/.stamp) holds a hash of the list and of this script;
# when it matches, nothing is fetched. The stamp is written only after every
# chart was copied, so a failed fetch never leaves one behind.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
list="$root/hack/charts/corpus.txt"
out="${CAPSTAN_BIN_DIR:-$root/bin}/charts"
stamp="$out/.stamp"

mkdir -p "$out"
exec 9>"$out/.lock"
flock 9

want="$(cat "$list" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "charts: up to date in $out (stamp $stamp)"
	exit 0
fi
rm -f "$stamp"

# The module cache may hold the modules already; `go mod download` fetches
# only what is missing. It needs a module to run in, and none of the
# corpus's modules is a dependency of Capstan's, so a scratch one serves.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
(cd "$scratch" && go mod init charts.local >/dev/null 2>&1)

started=$SECONDS
while read -r name module version path; do
	[[ -z "$name" || "$name" == \#* ]] && continue
	# NOTE: GOTOOLCHAIN=local keeps the download from
	# switching Go versions for a module whose go.mod names a newer one; a
	# chart needs none of its module's Go code.
	# go mod download -json reports a failure in its output's Error field,
	# so the output is kept to say why before the script stops.
	if ! json="$(cd "$scratch" && GOTOOLCHAIN=local go mod download -json "$module@$version")"; then
		error="$(sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
		echo "charts: downloading $module@$version for $name failed: ${error:-see the message of go mod download above}" >&2
		exit 1
	fi
	dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json")"
	if [[ -z "$dir" || ! -f "$dir/$path/Chart.yaml" ]]; then
		echo "charts: $module@$version has no chart at $path" >&2
		exit 1
	fi
	rm -rf "$out/$name"
	cp -r --no-preserve=mode "$dir/$path" "$out/$name"
	echo "charts: $name from $module@$version ($((SECONDS - started))s elapsed)"
done <"$list"
echo "$want" >"$stamp"
