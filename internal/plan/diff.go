package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// Comparison is the outcome of comparing one object's dry-run result with
// its live state.
type Comparison struct {
	// Action is Create, Update or Unchanged.
	Action capstanv1.Action
	// Diff is the unified diff of an update, with Secret data hidden.
	Diff string
	// DiffTooLarge is true when Diff only counts the lines that change:
	// they are too many, over too many lines, for a diff for status to
	// compare (maxDiffWork).
	DiffTooLarge bool
	// DiffNotKept is true when no diff was computed: the diffs before it
	// used all that status keeps of them (MaxTotalDiffBytes).
	DiffNotKept bool
	// Digest identifies the change itself, Secret values included, so that a
	// plan's hash changes whenever what would be applied changes. It reveals
	// nothing: it is a hash of the whole change. An update's covers only the
	// fields the apply changes (ChangeDigest), not those around them. A
	// field the chart generates at random counts as a placeholder
	// (Generated): its bytes are new on every render.
	Digest string
}

// Compare decides what applying an object would do. manifest is the object
// Capstan applies, dryRun the API server's server-side dry-run result of
// applying it, and live the object as it is, or nil when it does not exist.
func Compare(manifest, live, dryRun *unstructured.Unstructured) (Comparison, error) {
	return CompareHiding(manifest, live, dryRun, nil)
}

// CompareHiding is Compare, with the diff also hiding every string that
// hides reports as holding a value never to be shown (HideValuesPair).
// hides may be nil.
func CompareHiding(manifest, live, dryRun *unstructured.Unstructured, hides func(string) bool) (Comparison, error) {
	return compare(manifest, live, dryRun, hides, Generated{}, diffForStatus)
}

// diffMode is how much of a diff compare computes.
type diffMode int

const (
	// diffForStatus computes a diff for status: one past maxDiffWork only
	// counts its lines.
	diffForStatus diffMode = iota
	// diffFull computes every diff whole, for `capstan plan`, which then
	// shows each up to MaxFullDiffBytes.
	diffFull
	// diffNone computes no diff: status has no room left for it.
	diffNone
)

// compare is CompareHiding, with the digest covering the fields that
// generated says the chart generates at random as a person can review
// them (Generated). The diff shows them as they are; mode says how much of
// it to compute.
func compare(manifest, live, dryRun *unstructured.Unstructured, hides func(string) bool, generated Generated, mode diffMode) (Comparison, error) {
	desired := Normalize(dryRun)
	full := mode == diffFull
	if live == nil {
		if mode == diffNone {
			return Comparison{Action: capstanv1.ActionCreate, DiffNotKept: true, Digest: generated.CreateDigest(manifest)}, nil
		}
		// NOTE: the digest of a create is the manifest's, not the dry run's:
		// a dry-run create allocates values such as a Service's clusterIP
		// afresh each time, which would change the plan's hash on every
		// reconcile and make every approval stale.
		_, shown := RedactSecretPair(nil, desired)
		_, shown = HideValuesPair(nil, shown, hides)
		text, tooLarge, err := unified(nil, shown, dryRun, full)
		if err != nil {
			return Comparison{}, err
		}
		return Comparison{Action: capstanv1.ActionCreate, Diff: text, DiffTooLarge: tooLarge, Digest: generated.CreateDigest(manifest)}, nil
	}
	current := Normalize(live)
	if equality.Semantic.DeepEqual(current.Object, desired.Object) {
		return Comparison{Action: capstanv1.ActionUnchanged}, nil
	}
	if mode == diffNone {
		return Comparison{Action: capstanv1.ActionUpdate, DiffNotKept: true, Digest: generated.changeDigest(manifest, current.Object, desired.Object)}, nil
	}
	shownLive, shownDesired := RedactSecretPair(current, desired)
	shownLive, shownDesired = HideValuesPair(shownLive, shownDesired, hides)
	text, tooLarge, err := unified(shownLive, shownDesired, dryRun, full)
	if err != nil {
		return Comparison{}, err
	}
	return Comparison{Action: capstanv1.ActionUpdate, Diff: text, DiffTooLarge: tooLarge, Digest: generated.changeDigest(manifest, current.Object, desired.Object)}, nil
}

// ChangeDigest identifies an update by what it changes: every field whose
// value differs between live and desired (both normalised), by its path,
// with its value before and after, or as added or removed. Fields that stay
// as they are do not count, wherever they are: an approval of a change
// stays valid while another writer changes a field beside it (an app that
// writes its own key into a ConfigMap the chart also sets), as it would not
// if the digest covered the diff's context lines. Any other change (another
// value, before or after, a field added or removed) gives another digest.
//
// NOTE: a path is a JSON array of map keys (strings) and list indexes
// (numbers), so that no key can pass for an index or for a path of two
// keys; each entry is JSON, so no value can pass for the next entry.
func ChangeDigest(live, desired map[string]any) string {
	var entries []any
	walkChanges(nil, live, desired, func(op string, path []any, before, after any) {
		b, _ := json.Marshal([]any{op, path, before, after})
		entries = append(entries, b)
	})
	return digest(append([]any{"update"}, entries...)...)
}

// walkChanges calls change for each field where from and to differ, in a
// stable order: map keys sorted, list items by index. Maps and lists on
// both sides are walked into; anything else that differs is one change.
func walkChanges(path []any, from, to any, change func(op string, path []any, before, after any)) {
	at := func(k any) []any { return append(slices.Clip(path), k) }
	switch f := from.(type) {
	case map[string]any:
		t, ok := to.(map[string]any)
		if !ok {
			break
		}
		keys := slices.Collect(maps.Keys(f))
		for k := range t {
			if _, ok := f[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			fv, inFrom := f[k]
			tv, inTo := t[k]
			switch {
			case !inFrom:
				change("add", at(k), nil, tv)
			case !inTo:
				change("remove", at(k), fv, nil)
			default:
				walkChanges(at(k), fv, tv, change)
			}
		}
		return
	case []any:
		t, ok := to.([]any)
		if !ok {
			break
		}
		for i := range max(len(f), len(t)) {
			switch {
			case i >= len(f):
				change("add", at(i), nil, t[i])
			case i >= len(t):
				change("remove", at(i), f[i], nil)
			default:
				walkChanges(at(i), f[i], t[i], change)
			}
		}
		return
	}
	if !equality.Semantic.DeepEqual(from, to) {
		change("change", path, from, to)
	}
}

// maxDiffWork bounds the work of a diff for status of more than
// smallDiffLines lines in all, once the lines both sides begin and end
// with alike are set aside: the lines left to compare times the places
// where they differ (the lines that change, and the breaks where lines
// alike on both sides follow another order: a list rendered in random
// order). Past it, the diff says how many lines
// change, and `capstan plan` shows it whole up to MaxFullDiffBytes.
//
// NOTE: difflib's matching takes time that grows about as the lines
// compared times the blocks of lines that match between the changes: 16 s
// for a dashboard's JSON of 40,000 lines whose every seventh line changes
// (an upgrade that changes every query), on every preview of a pending
// change; 4,000 lines with 600 changed take about 50 ms. A few changes far
// apart (a CRD's chart label at its top, and one line deep in its schema)
// cost little however large the object. Status keeps 16 KiB of a diff
// anyway (MaxDiffBytes). docs/benchmarks.md has the figures.
const maxDiffWork = smallDiffLines * 600

// smallDiffLines is the size, both sides together, under which a diff is
// always compared.
const smallDiffLines = 4000

// unified renders a unified diff of two objects as YAML. A nil side is
// empty. Unless full, a diff that would take more work than maxDiffWork
// is only counted (tooLarge).
func unified(from, to *unstructured.Unstructured, named *unstructured.Unstructured, full bool) (text string, tooLarge bool, err error) {
	side := func(obj *unstructured.Unstructured) ([]string, error) {
		if obj == nil {
			return difflib.SplitLines(""), nil
		}
		b, err := yaml.Marshal(obj.Object)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", describe(named), err)
		}
		return difflib.SplitLines(string(b)), nil
	}
	a, err := side(from)
	if err != nil {
		return "", false, err
	}
	b, err := side(to)
	if err != nil {
		return "", false, err
	}
	name := describe(named)
	d := difflib.UnifiedDiff{A: a, B: b, FromFile: "live/" + name, ToFile: "planned/" + name, Context: 3}
	if len(a)+len(b) <= smallDiffLines {
		text, err := difflib.GetUnifiedDiffString(d)
		return text, false, err
	}
	// NOTE: the lines both sides begin and end with alike are set aside,
	// but for the context lines, in linear time: a change in one place of
	// a large object is then as quick to show as in a small one.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	midA, midB := a[pre:len(a)-suf], b[pre:len(b)-suf]
	if removed, added := changedLines(midA, midB); !full && len(midA) > 0 && len(midB) > 0 &&
		(len(midA)+len(midB))*(removed+added+orderBreaks(midA, midB)) > maxDiffWork {
		changes := fmt.Sprintf("%d lines removed and %d added", removed, added)
		if removed+added == 0 {
			changes = "lines in another order"
		}
		return fmt.Sprintf("--- %s\n+++ %s\n%s%s, between line %d and line %d; run `capstan plan` for the diff, which it shows up to 128 KiB)\n",
			d.FromFile, d.ToFile, countedMark, changes, pre+1, pre+max(len(midA), len(midB))), true, nil
	}
	start := pre - min(pre, d.Context)
	d.A, d.B = a[start:len(a)-suf+min(suf, d.Context)], b[start:len(b)-suf+min(suf, d.Context)]
	text, err = difflib.GetUnifiedDiffString(d)
	if err != nil || start == 0 {
		return text, false, err
	}
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "@@ -") {
			lines[i] = shiftHunk(l, start)
		}
	}
	return strings.Join(lines, ""), false, nil
}

// countedMark begins the line of a diff that only counts the lines that
// change (Comparison.DiffTooLarge). No line of a unified diff begins with
// "(": its lines begin with a header's "---", "+++" or "@@", or with " ",
// "+" or "-".
const countedMark = "(diff too large to show here: "

// OnlyCounted reports whether diff, a plan object's diff, only counts the
// lines that change, and shows none of them (Comparison.DiffTooLarge).
func OnlyCounted(diff string) bool {
	return strings.Contains(diff, "\n"+countedMark)
}

// shiftHunk adds off to the first line numbers of a unified diff's hunk
// header, "@@ -1,4 +1,5 @@", of a diff of lines off lines into the texts.
func shiftHunk(header string, off int) string {
	fields := strings.Fields(header)
	if len(fields) < 4 {
		return header
	}
	for _, i := range []int{1, 2} {
		sign, rest := fields[i][:1], fields[i][1:]
		first, length, _ := strings.Cut(rest, ",")
		n, err := strconv.Atoi(first)
		if err != nil {
			return header
		}
		fields[i] = sign + strconv.Itoa(n+off)
		if length != "" {
			fields[i] += "," + length
		}
	}
	return strings.Join(fields, " ") + "\n"
}

// changedLines counts the lines of a that b has not (removed) and those
// of b that a has not (added), each line as often as it appears.
func changedLines(a, b []string) (removed, added int) {
	seen := make(map[string]int, len(a))
	for _, l := range a {
		seen[l]++
	}
	for _, l := range b {
		if seen[l] > 0 {
			seen[l]--
		} else {
			added++
		}
	}
	for _, n := range seen {
		removed += n
	}
	return removed, added
}

// orderBreaks counts the places where the lines found once in a and once
// in b do not follow each other in b as they do in a: 0 when a and b only
// differ by lines changed, one or more for each line moved.
func orderBreaks(a, b []string) int {
	inA := make(map[string]int, len(a))
	for _, l := range a {
		inA[l]++
	}
	inB := make(map[string]int, len(b))
	at := make(map[string]int, len(b))
	for j, l := range b {
		inB[l]++
		at[l] = j
	}
	breaks := 0
	lastI, lastJ := -1, -1
	for i, l := range a {
		if inA[l] != 1 || inB[l] != 1 {
			continue
		}
		j := at[l]
		if lastI >= 0 && j-lastJ != i-lastI {
			breaks++
		}
		lastI, lastJ = i, j
	}
	return breaks
}

// describe names an object as kind/namespace/name.
func describe(obj *unstructured.Unstructured) string {
	if obj == nil {
		return ""
	}
	if ns := obj.GetNamespace(); ns != "" {
		return obj.GetKind() + "/" + ns + "/" + obj.GetName()
	}
	return obj.GetKind() + "/" + obj.GetName()
}

// CreateDigest identifies the creation of manifest, for a plan's hash. A
// create planned without a dry run (its namespace or CRD does not exist yet)
// uses it too, so the hash stays the same once the dry run can be made.
func CreateDigest(manifest *unstructured.Unstructured) string {
	raw, _ := json.Marshal(manifest.Object)
	return digest("create", raw)
}

func digest(parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		switch v := p.(type) {
		case []byte:
			fmt.Fprintf(h, "%d:", len(v))
			h.Write(v)
		default:
			s := fmt.Sprint(v)
			fmt.Fprintf(h, "%d:%s", len(s), s)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
