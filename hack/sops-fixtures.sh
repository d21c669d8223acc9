#!/usr/bin/env bash
# Writes internal/sops/testdata/*.enc.* anew with the real sops and age-keygen,
# built from the Go module proxy into bin/. The tests read the files it wrote;
# run it only to change them (each run draws new keys' IVs, so every file changes).
set -euo pipefail
cd "$(dirname "$0")/.."
SOPS_VERSION=v3.13.3
AGE_VERSION=v1.3.2
mkdir -p bin/sops-tools
if [ ! -x bin/sops-tools/sops ]; then
	GOBIN="$PWD/bin/sops-tools" go install "github.com/getsops/sops/v3/cmd/sops@$SOPS_VERSION"
fi
if [ ! -x bin/sops-tools/age-keygen ]; then
	GOBIN="$PWD/bin/sops-tools" go install "filippo.io/age/cmd/age-keygen@$AGE_VERSION"
fi
sops=bin/sops-tools/sops
td=internal/sops/testdata
for k in age other; do
	[ -f "$td/$k.agekey" ] || bin/sops-tools/age-keygen -o "$td/$k.agekey"
done
me=$(sed -n 's/^# public key: //p' "$td/age.agekey")
other=$(sed -n 's/^# public key: //p' "$td/other.agekey")
enc() { # enc OUT IN [sops flags...]
	out=$1 in=$2
	shift 2
	SOPS_AGE_KEY_FILE=/dev/null "$sops" encrypt "$@" "$in" >"$out"
}
enc "$td/secret.enc.yaml" "$td/plain/secret.yaml" --age "$me" --encrypted-regex '^(data|stringData)$'
enc "$td/all.enc.yaml" "$td/plain/all.yaml" --age "$me"
enc "$td/config.enc.yaml" "$td/plain/config.yaml" --age "$me" --encrypted-regex '^data$'
enc "$td/edges.enc.yaml" "$td/plain/edges.yaml" --age "$me"
enc "$td/vars.enc.yaml" "$td/plain/vars.yaml" --age "$me" --encrypted-regex '^(replicas|value)$'
enc "$td/dated.enc.yaml" "$td/plain/dated.yaml" --age "$me" --encrypted-regex '^password$'
enc "$td/multi.enc.yaml" "$td/plain/multi.yaml" --age "$me,$other" --encrypted-regex '^(data|stringData)$'
# mac_only_encrypted is a creation rule of .sops.yaml, with no flag.
cfg=$(mktemp)
trap 'rm -f "$cfg"' EXIT
printf 'creation_rules:\n  - age: %s\n    encrypted_regex: ^(data|stringData)$\n    mac_only_encrypted: true\n' "$me" >"$cfg"
"$sops" --config "$cfg" encrypt "$td/plain/secret.yaml" >"$td/maconly.enc.yaml"
enc "$td/secret.enc.json" "$td/plain/secret.json" --age "$me" --encrypted-regex '^(data|stringData)$'
# By their names sops picks its JSON, binary and dotenv stores.
enc "$td/order.enc.json" "$td/plain/order.json" --age "$me" --encrypted-regex '^data$'
enc "$td/tls.enc.crt" "$td/plain/tls.crt" --age "$me"
enc "$td/secret.enc.env" "$td/plain/secret.env" --age "$me"
enc "$td/other.enc.yaml" "$td/plain/secret.yaml" --age "$other" --encrypted-regex '^(data|stringData)$'
# Changed after it was encrypted: an unencrypted value the MAC covers.
sed 's/^    name: db$/    name: db-renamed/' "$td/secret.enc.yaml" >"$td/tampered.enc.yaml"
# What sops itself decrypts them to, for the tests to compare with.
for f in secret.enc.yaml all.enc.yaml config.enc.yaml edges.enc.yaml dated.enc.yaml multi.enc.yaml maconly.enc.yaml; do
	SOPS_AGE_KEY_FILE="$td/age.agekey" "$sops" decrypt "$td/$f" >"$td/${f%.enc.yaml}.dec.yaml"
done
for f in secret order; do
	SOPS_AGE_KEY_FILE="$td/age.agekey" "$sops" decrypt "$td/$f.enc.json" >"$td/$f.dec.json"
done
SOPS_AGE_KEY_FILE="$td/age.agekey" "$sops" decrypt "$td/tls.enc.crt" >"$td/tls.dec.crt"
