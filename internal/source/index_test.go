package source

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"
)

// wholeIndex parses an index in one piece, as Helm does.
func wholeIndex(data []byte) (*repo.IndexFile, error) {
	idx := &repo.IndexFile{}
	err := yaml.Unmarshal(data, idx)
	return idx, err
}

// sameIndex says how a cut parse differs from the whole one, or "".
func sameIndex(cut, whole *repo.IndexFile) string {
	if cut.APIVersion != whole.APIVersion || !cut.Generated.Equal(whole.Generated) {
		return "the top-level fields differ"
	}
	if len(cut.Entries) != len(whole.Entries) {
		return "the charts differ"
	}
	for name, cvs := range whole.Entries {
		got, ok := cut.Entries[name]
		if !ok {
			return "chart " + name + " is missing"
		}
		if len(got) != len(cvs) {
			return "chart " + name + " has another number of versions"
		}
		for i := range cvs {
			if !reflect.DeepEqual(got[i], cvs[i]) {
				return "a version of " + name + " differs"
			}
		}
	}
	return ""
}

func TestIndexIsCutAsWholeParseReadsIt(t *testing.T) {
	const top = "apiVersion: v1\ngenerated: \"2024-01-01T00:00:00Z\"\n"
	tests := []struct {
		name  string
		index string
		cut   bool // cut, rather than parsed whole
	}{
		{"as Helm writes it", top + "entries:\n  demo:\n  - apiVersion: v2\n    name: demo\n    version: 1.1.0\n    urls:\n    - demo-1.1.0.tgz\n  - name: demo\n    version: 1.0.0\n    description: |\n      two lines,\n\n      # not a comment\n  other:\n  - name: other\n    version: 0.1.0\n", true},
		{"items indented under their chart", "entries:\n    demo:\n        - name: demo\n          version: 1.0.0\n          urls: [a.tgz, b.tgz]\n        -   name: demo\n            version: 2.0.0\napiVersion: v1\n", true},
		{"comments and blank lines", "# an index\napiVersion: v1\n\nentries:\n  # the demo chart\n  demo:\n\n  - name: demo # inline\n    version: 1.0.0\n# between\n  - name: demo\n    version: 2.0.0\n", true},
		{"CRLF line ends", strings.ReplaceAll(top+"entries:\n  demo:\n  - name: demo\n    version: 1.0.0\n", "\n", "\r\n"), true},
		{"entries last without a final newline", top + "entries:\n  demo:\n  - name: demo\n    version: 1.0.0", true},
		{"a name given twice keeps the last", top + "entries:\n  demo:\n  - name: demo\n    version: 1.0.0\n  demo:\n  - name: demo\n    version: 2.0.0\n", true},
		{"no versions", top + "entries:\n  demo:\n", true},
		{"flow style", top + "entries: {demo: [{name: demo, version: 1.0.0}]}\n", false},
		{"JSON", `{"apiVersion": "v1", "entries": {"demo": [{"name": "demo", "version": "1.0.0"}]}}`, false},
		{"an anchor shared between versions", top + "entries:\n  demo:\n  - &v\n    name: demo\n    version: 1.0.0\n  - *v\n", false},
		{"a quoted scalar over lines", top + "entries:\n  demo:\n  - name: demo\n    version: 1.0.0\n    description: \"one\n  two:\n    three\"\n", false},
		{"a chart name YAML reads as a boolean", top + "entries:\n  yes:\n  - name: yes\n    version: 1.0.0\n", false},
		{"a chart name YAML reads as a number", top + "entries:\n  1.0:\n  - name: a\n    version: 1.0.0\n", false},
		{"a quoted chart name", top + "entries:\n  \"demo\":\n  - name: demo\n    version: 1.0.0\n", false},
		{"two documents", top + "entries:\n  demo:\n  - name: demo\n    version: 1.0.0\n---\nentries: {}\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cut, err := parseCutIndex(context.Background(), []byte(tt.index), false)
			if (err == nil) != tt.cut {
				t.Fatalf("cut: %v, want cut %v", err, tt.cut)
			}
			whole, werr := wholeIndex([]byte(tt.index))
			if err == nil {
				if werr != nil {
					t.Fatalf("cut, but the whole parse fails: %v", werr)
				}
				if d := sameIndex(cut, whole); d != "" {
					t.Fatal(d)
				}
				kept, err := parseCutIndex(context.Background(), []byte(tt.index), true)
				if err != nil {
					t.Fatalf("cut, but not when kept: %v", err)
				}
				if d := sameIndex(kept, keptWhole(whole)); d != "" {
					t.Fatal("kept: " + d)
				}
			}
			idx, err := parseIndex(context.Background(), []byte(tt.index))
			if (err == nil) != (werr == nil) {
				t.Fatalf("parseIndex: %v, the whole parse: %v", err, werr)
			}
			if err == nil && len(idx.Entries) != len(whole.Entries) {
				t.Fatalf("parseIndex kept %d charts, the whole parse %d", len(idx.Entries), len(whole.Entries))
			}
		})
	}
}

func TestABigIndexIsCut(t *testing.T) {
	data := bigIndex(50, 20)
	cut, err := parseCutIndex(context.Background(), data, false)
	if err != nil {
		t.Fatalf("an index as Helm writes it is not cut: %v", err)
	}
	whole, err := wholeIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	if d := sameIndex(cut, whole); d != "" {
		t.Fatal(d)
	}
}

func TestIndexBounds(t *testing.T) {
	head := "apiVersion: v1\nentries:\n  demo:\n  - name: demo\n    version: 1.0.0\n"
	huge := "    description: " + strings.Repeat("x", MaxIndexEntryBytes) + "\n"
	// One version over its bound, in an index that fits the whole parse:
	// read whole, as Helm would.
	if idx, err := parseIndex(context.Background(), []byte(head+huge)); err != nil || len(idx.Entries["demo"]) != 1 {
		t.Fatalf("a small index with one big version: %v", err)
	}
	// The same in an index past the whole parse's bound: refused, saying
	// why.
	big := head + huge + strings.Repeat("  - name: demo\n    version: 0.0.1\n    description: "+strings.Repeat("x", 80)+"\n", MaxWholeIndexBytes/128)
	_, err := parseIndex(context.Background(), []byte(big))
	if err == nil || !strings.Contains(err.Error(), "not laid out as Helm writes an index") || !strings.Contains(err.Error(), "over the 1048576 Capstan reads for one") {
		t.Fatalf("want the bounds named, got %v", err)
	}
	// A big index as Helm writes it is read, cut.
	if _, err := parseIndex(context.Background(), []byte(strings.Replace(big, huge, "", 1))); err != nil {
		t.Fatalf("a big index as Helm writes it: %v", err)
	}
}

func TestParsedIndexKeepsWhatIsRead(t *testing.T) {
	idx, err := parseIndex(context.Background(), []byte("apiVersion: v1\nentries:\n  demo:\n  - apiVersion: v2\n    name: demo\n    version: 1.0.0\n    appVersion: \"2.0\"\n    description: long text\n    keywords: [a]\n    maintainers: [{name: me}]\n    annotations: {a: b}\n    urls: [demo-1.0.0.tgz]\n    digest: abc\n    created: \"2024-01-01T00:00:00Z\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	cv := idx.Entries["demo"][0]
	if cv.Name != "demo" || cv.Version != "1.0.0" || cv.APIVersion != "v2" || cv.AppVersion != "2.0" || cv.Digest != "abc" ||
		len(cv.URLs) != 1 || !cv.Created.Equal(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("a field read later was lost: %+v %+v", cv, cv.Metadata)
	}
	if cv.Description != "" || cv.Keywords != nil || cv.Maintainers != nil || cv.Annotations != nil {
		t.Fatalf("a field never read is kept: %+v", cv.Metadata)
	}
	if got := retainedSize(idx); got < 400 || got > 1000 {
		t.Fatalf("retainedSize %d", got)
	}
}

// keptWhole is what parseIndex keeps of a whole parse, before it sorts:
// every chart, with the versions keep keeps, in their order.
func keptWhole(whole *repo.IndexFile) *repo.IndexFile {
	out := *whole
	out.Entries = make(map[string]repo.ChartVersions, len(whole.Entries))
	for name, cvs := range whole.Entries {
		var kept repo.ChartVersions
		for _, cv := range cvs {
			if cv = keep(cv); cv != nil {
				kept = append(kept, cv)
			}
		}
		out.Entries[name] = kept
	}
	return &out
}

// FuzzIndexCutKept checks that an index cut by its lines and kept as it is
// decoded, as parseIndex reads it, keeps what keeping each version of a
// whole parse keeps, whatever the text.
func FuzzIndexCutKept(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nentries:\n  demo:\n  - name: demo\n    version: 1.0.0\n    urls:\n    - a.tgz\n  other:\n  - name: other\n    version: 0.1.0\n",
		"apiVersion: v1\nentries:\n  demo:\n  - name: demo\n  - {}\n  - apiVersion: v1\n    name: demo\n    version: 2.0.0\n  gone:\n  - {}\n",
		"apiVersion: v1\nentries:\n  demo:\n  - name: demo\n    version: 1.0.0\n  demo:\n  - name: demo\n    version: 2.0.0\n    description: x\n",
		"entries:\n    demo:\n        - name: demo\n          version: 1.0.0\n          appVersion: \"1\"\napiVersion: v1\n",
		"apiVersion: v1\nentries:\n  demo:\n  - name: Demo\n    version: not.a.version\n  - name: demo\n    version: 1.0.0\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog(10 * time.Second)()
		cut, err := parseCutIndex(context.Background(), data, true)
		if err != nil {
			return
		}
		whole, err := wholeIndex(data)
		if err != nil {
			t.Fatalf("cut, but the whole parse fails: %v\n%q", err, data)
		}
		if d := sameIndex(cut, keptWhole(whole)); d != "" {
			t.Fatalf("%s\n%q", d, data)
		}
	})
}

// FuzzIndexCut checks that an index cut by its lines parses to what a
// whole parse gives, whatever the text.
func FuzzIndexCut(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nentries:\n  demo:\n  - name: demo\n    version: 1.0.0\n    urls:\n    - a.tgz\n  other:\n  - name: other\n    version: 0.1.0\n",
		"apiVersion: v1\nentries:\n  demo:\n  - name: demo\n    description: \"a\n  b:\n    c\"\n",
		"apiVersion: v1\nentries:\n  demo:\n  - &a\n    name: demo\n  - *a\n",
		"entries:\n    demo:\n        - name: demo\n          version: 1.0.0\napiVersion: v1\n",
		"apiVersion: v1\nentries:\n  demo:\n  - name: demo\n    description: |\n      x\n\n      y\n",
		"apiVersion: v1\nentries:\n  a:\n  -\n    name: a\n  - name: b\n    tags: [x,\n  y]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog(10 * time.Second)()
		cut, err := parseCutIndex(context.Background(), data, false)
		if err != nil {
			return
		}
		whole, err := wholeIndex(data)
		if err != nil {
			t.Fatalf("cut, but the whole parse fails: %v\n%q", err, data)
		}
		if d := sameIndex(cut, whole); d != "" {
			t.Fatalf("%s\n%q", d, data)
		}
	})
}

// TestIndexVersionsAreBounded: an index that lists more versions than
// Capstan reads is refused, saying which bound, before a version is
// decoded; however small each version's text, each would cost a decode.
func TestIndexVersionsAreBounded(t *testing.T) {
	data := []byte("apiVersion: v1\nentries:\n  a:\n" + strings.Repeat("  - {}\n", MaxIndexVersions+1))
	_, err := parseIndex(context.Background(), data)
	if err == nil || !strings.Contains(err.Error(), "more than 200000 chart versions (MaxIndexVersions)") {
		t.Fatalf("want the bound on versions named, got %v", err)
	}
	// Laid out otherwise, and parsed whole: the same bound, for versions
	// of so few values (nulls) that MaxWholeIndexValues lets them in.
	data = []byte("apiVersion: v1\nentries: {a: [" + strings.Repeat("~,", MaxIndexVersions+1) + "]}\n")
	if _, err := parseIndex(context.Background(), data); err == nil || !strings.Contains(err.Error(), "(MaxIndexVersions)") {
		t.Fatalf("want the bound on versions named, got %v", err)
	}
}

// TestIndexParseHoldsWhatItKeeps: a parse holds what it keeps of the
// versions, not every version the index lists: an index of many versions
// that are all dropped takes little memory however many there are.
func TestIndexParseHoldsWhatItKeeps(t *testing.T) {
	const versions = 100_000
	data := []byte("apiVersion: v1\nentries:\n  a:\n" + strings.Repeat("  - {name: a}\n", versions))
	runtime.GC()
	base := liveHeap()
	var peak uint64
	stop := samplePeak(&peak)
	idx, err := parseIndex(context.Background(), data)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Entries["a"]) != 0 {
		t.Fatalf("kept %d versions without a version", len(idx.Entries["a"]))
	}
	// NOTE: the live heap counts garbage not yet collected, which the
	// collector lets grow to about 4 MiB past what is live.
	const bound = 32 << 20
	t.Logf("peak heap %d KiB over %d KiB before", (peak-min(peak, base))>>10, base>>10)
	if peak > base && peak-base > bound {
		t.Fatalf("parsing %d versions of %d bytes took %d MiB of heap at its peak, over %d MiB", versions, len(data), (peak-base)>>20, bound>>20)
	}
}

// TestIndexParseStopsWithItsContext: a parse whose time is up stops, and
// gives its turn among the parses up, rather than run to its end.
func TestIndexParseStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := parseIndex(ctx, bigIndex(2, 1100))
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stopped parsing it") {
		t.Fatalf("got %v, want the parse stopped", err)
	}
}

// TestIndexParseThatFinishesIsUsed: a parse whose context ends after it
// read its last version gives its index, and one that ended before gives
// an error, never neither: the fetch that waits for it keeps what it gives
// in the cache.
func TestIndexParseThatFinishesIsUsed(t *testing.T) {
	const charts, versions = 2, 10
	// NOTE: the cut parse asks ctx once before each version, so this ctx
	// ends just after the parse read all of them.
	ctx := &endsAfter{Context: context.Background(), n: charts * versions}
	idx, err := parseIndex(ctx, bigIndex(charts, versions))
	if err != nil || idx == nil || len(idx.Entries) != charts {
		t.Fatalf("a parse whose context ended after its last version: index %v, error %v; want its index of %d charts", idx != nil, err, charts)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for name, data := range map[string][]byte{
		"cut":   bigIndex(charts, versions),
		"whole": []byte("apiVersion: v1\nentries: {demo: [{name: demo, version: 1.0.0}]}\n"),
	} {
		idx, err := parseIndex(ended, data)
		if err == nil && idx == nil {
			t.Fatalf("%s: no index and no error", name)
		}
		if err == nil && len(idx.Entries) == 0 {
			t.Fatalf("%s: an index of no charts", name)
		}
	}
}

// endsAfter is a context that ends once Err has been asked n times.
type endsAfter struct {
	context.Context
	n     int64
	asked atomic.Int64
}

func (c *endsAfter) Err() error {
	if c.asked.Add(1) > c.n {
		return context.Canceled
	}
	return nil
}

// TestWholeIndexValuesAreBounded: an index that cannot be cut is refused
// before it is decoded when it holds more values than a whole parse of an
// index as Helm writes one, however few bytes each takes; one just under
// the bound, of the shapes that cost the most for what is counted (flow
// keys given with no value, which hold a null), takes at most some
// 300 MiB; and an index of MaxWholeIndexBytes written as Helm would, in
// JSON, fits the bound.
func TestWholeIndexValuesAreBounded(t *testing.T) {
	peakOf := func(data []byte) (uint64, time.Duration, error) {
		runtime.GC()
		base := liveHeap()
		var peak uint64
		stop := samplePeak(&peak)
		start := time.Now()
		_, err := parseIndex(context.Background(), data)
		stop()
		return peak - min(peak, base), time.Since(start), err
	}
	data := []byte("apiVersion: v1\nentries: {demo: [" + strings.Repeat("{},", MaxWholeIndexBytes/3-20) + "]}\n")
	peak, took, err := peakOf(data)
	if err == nil || !strings.Contains(err.Error(), "(MaxWholeIndexValues)") {
		t.Fatalf("want the bound on values named, got %v", err)
	}
	t.Logf("refused in %s, peak heap %d KiB over the heap before", took, peak>>10)
	if peak > 32<<20 {
		t.Fatalf("refusing %d bytes took %d MiB of heap at its peak", len(data), peak>>20)
	}

	var keys strings.Builder
	keys.WriteString("apiVersion: v1\nentries: {demo: [{name: demo, version: 1.0.0")
	for i := 0; wholeIndexValues([]byte(keys.String())) < MaxWholeIndexValues-10_000; i++ {
		for j := range 1000 {
			fmt.Fprintf(&keys, ",%x", i*1000+j)
		}
	}
	keys.WriteString("}]}\n")
	for name, data := range map[string][]byte{
		"flow maps of a key with no value":     []byte("apiVersion: v1\nentries: {demo: [" + strings.Repeat("{a},", (MaxWholeIndexValues-100)/(wholeIndexValues([]byte("{a},"))-1)) + "]}\n"),
		"a version of many keys with no value": []byte(keys.String()),
	} {
		if n := wholeIndexValues(data); n > MaxWholeIndexValues {
			t.Fatalf("%s: counts %d, over the bound", name, n)
		}
		peak, took, err := peakOf(data)
		t.Logf("%s: %d bytes, parsed in %s, peak heap %d MiB over the heap before, %v", name, len(data), took, peak>>20, err)
		// NOTE: measured at 220 to 300 MiB; the bound leaves room for
		// the collector's timing, and a count that lets twice as much in
		// comes to some 550.
		if peak > 360<<20 {
			t.Errorf("%s: a whole parse under the bound took %d MiB of heap at its peak, over 360 MiB", name, peak>>20)
		}
	}

	y := bigIndex(1, 500)
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	if n := wholeIndexValues(j) * (MaxWholeIndexBytes / len(j)); n > MaxWholeIndexValues {
		t.Fatalf("an index of %d bytes in JSON would count %d values, over MaxWholeIndexValues", MaxWholeIndexBytes, n)
	}
}

// TestIndexParseOfFewBigVersionsStops: a parse of a few versions, each
// long to decode, stops with its context too, and does not run on for
// seconds after its fetch's time is up.
func TestIndexParseOfFewBigVersionsStops(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nentries:\n  demo:\n")
	desc := strings.Repeat("word ", 12_000)
	for i := range 20 {
		fmt.Fprintf(&b, "  - name: demo\n    version: 1.0.%d\n    description: %s\n", i, desc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := parseIndex(ctx, []byte(b.String()))
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stopped parsing it") {
		t.Fatalf("got %v, want the parse stopped", err)
	}
}
