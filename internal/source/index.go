package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"
)

// An index.yaml is parsed one chart version at a time, so that its memory
// follows the largest entry and not the whole file.
//
// Decoding YAML into Helm's types (through sigs.k8s.io/yaml, as Helm reads
// an index) holds some forty times the text's size while it runs: a 64 MiB
// index, the most Capstan fetches, would take 2.4 GB, and one chart link of
// a tenant could end the controller's pod at its memory limit, with every
// other add-on. Indexes as Helm, ChartMuseum, Harbor, chart-releaser and
// the big registries write them are block YAML: a top-level `entries:`,
// one line per chart name, and one `- ` item per version beneath it. Such
// an index is cut into its versions by their lines and each is decoded
// alone, as the one item of a list, exactly as a whole parse would decode
// it. An index written otherwise (flow style, anchors shared between
// entries, JSON) is parsed whole, and only up to MaxWholeIndexBytes and
// MaxWholeIndexValues.
//
// NOTE: cutting by lines is safe because every way it could go wrong
// fails to parse: a version cut inside a quoted scalar or a flow
// collection leaves it unterminated, an alias cut from its anchor names an
// unknown anchor, and a line that is neither a chart's name nor a version
// where one must be stops the cut. Any failure falls back to the whole
// parse. FuzzIndexCut checks that both ways give the same index.
const (
	// MaxIndexEntryBytes bounds one version's text in a cut index.
	// Widely used charts list a few KiB per version; the largest entries
	// seen, with long descriptions and many dependencies, are under 64 KiB.
	MaxIndexEntryBytes = 1 << 20
	// MaxWholeIndexBytes bounds an index that cannot be cut, or the part
	// of one outside its entries, which is parsed whole.
	// It is low enough that an index of Helm's fields in compact JSON,
	// about one value (see wholeIndexValues) per 7 bytes, fits in
	// MaxWholeIndexValues.
	MaxWholeIndexBytes = 6 << 20
	// MaxIndexVersions bounds the versions an index lists, and the charts'
	// names. The largest public indexes list some tens of thousands
	// (Bitnami's whole index, about 20,000). Each listed version costs a
	// decode, however small its text, so without a bound the 64 MiB of
	// MaxIndexBytes, a few KiB gzip-compressed on the wire, would be
	// millions of decodes: minutes of a parse slot's time.
	MaxIndexVersions = 200_000
	// MaxWholeIndexValues bounds the values (keys, scalars, lists and
	// maps) of an index parsed whole, counted before it is decoded (see
	// wholeIndexValues). A whole parse costs up to some 300 bytes per one
	// counted, whatever the text: 6 MiB of `{a},` are 1.6 million maps of
	// a key and a null, near 2 GB and many seconds of a parse (and count
	// 7.9 million), where an index as Helm writes it
	// counts one per 7 bytes (compact JSON) to 10 (YAML), at most some
	// 900,000 in its 6 MiB.
	MaxWholeIndexValues = 1_000_000
	// MaxIndexKeptBytes bounds what one parsed index keeps (retainedSize):
	// the index cache's whole bound, which a larger index would not fit.
	MaxIndexKeptBytes = DefaultIndexCacheBytes
)

// indexLimitError is an index refused for one of Capstan's bounds on it.
// It is final: a whole parse of the same text would cost more, not less.
type indexLimitError struct{ msg string }

func (e *indexLimitError) Error() string { return e.msg }

// parseIndex reads index.yaml as Helm does: entries that fail validation are
// dropped (see indexEntryError), versions are sorted newest first, and what
// Capstan never reads of a version is let go. It stops, with ctx's error,
// when ctx ends.
func parseIndex(ctx context.Context, data []byte) (*repo.IndexFile, error) {
	if len(data) == 0 {
		return nil, errors.New("it is empty")
	}
	idx, err := parseCutIndex(ctx, data, true)
	var limit *indexLimitError
	// NOTE: a parse that ends with ctx still read the whole index, and
	// its index is used; only one that failed after ctx ended returns
	// ctx's error rather than fall back to the whole parse.
	switch {
	case errors.As(err, &limit), err != nil && ctx.Err() != nil:
		return nil, err
	case err != nil:
		if len(data) > MaxWholeIndexBytes {
			return nil, fmt.Errorf("it is %d bytes and not laid out as Helm writes an index (a top-level entries: with one - item per version), and Capstan reads such an index only up to %d bytes: %v", len(data), MaxWholeIndexBytes, err)
		}
		if idx, err = parseWholeIndex(ctx, data); err != nil {
			return nil, err
		}
	}
	if idx.APIVersion == "" {
		return nil, errors.New("it has no apiVersion")
	}
	idx.SortEntries()
	return idx, nil
}

// parseWholeIndex parses an index that cannot be cut in one piece, as Helm
// does, and keeps of it what parseCutIndex keeps. It refuses one of more
// values than MaxWholeIndexValues before it decodes any.
//
// NOTE: the decode cannot be stopped once it runs; ctx is checked before
// it starts, and MaxWholeIndexBytes and MaxWholeIndexValues bound how long
// it runs, to a few seconds.
func parseWholeIndex(ctx context.Context, data []byte) (*repo.IndexFile, error) {
	if n := wholeIndexValues(data); n > MaxWholeIndexValues {
		return nil, &indexLimitError{fmt.Sprintf("it is not laid out as Helm writes an index (a top-level entries: with one - item per version), and such an index is parsed whole, which Capstan does only up to %d keys, scalars, lists and maps (MaxWholeIndexValues), and it has about %d", MaxWholeIndexValues, n)}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("stopped parsing it: %w", err)
	}
	idx := &repo.IndexFile{}
	if err := yaml.Unmarshal(data, idx); err != nil {
		return nil, fmt.Errorf("it is not valid YAML: %v", err)
	}
	listed := 0
	for _, cvs := range idx.Entries {
		listed += len(cvs)
	}
	if err := tooMany(len(idx.Entries), listed); err != nil {
		return nil, err
	}
	var b keptBytes
	for name, cvs := range idx.Entries {
		if err := b.add(chartSize(name)); err != nil {
			return nil, err
		}
		kept := cvs[:0]
		for _, cv := range cvs {
			if cv = keep(cv); cv == nil {
				continue
			}
			if err := b.add(versionSize(cv)); err != nil {
				return nil, err
			}
			kept = append(kept, cv)
		}
		idx.Entries[name] = kept
	}
	return idx, nil
}

// wholeIndexValues is about how many values (keys, scalars, lists and
// maps) a whole parse of data builds, counted without decoding it: every
// value but the first follows one of the bytes counted. A `,` counts two,
// as it may start a flow key given with no value (`{a, b}`), which holds a
// null, and a `{` three, a map as well (`{a}`). It counts bytes
// inside scalars too, so an index of long texts counts more than it
// holds, never much less.
func wholeIndexValues(data []byte) int {
	n := 1
	for _, c := range data {
		switch c {
		case '{':
			n += 3
		case ',':
			n += 2
		case ':', '-', '?', '[', '\n', '*':
			n++
		}
	}
	return n
}

// tooMany refuses an index that lists more charts or versions than
// MaxIndexVersions.
func tooMany(charts, versions int) error {
	switch {
	case versions > MaxIndexVersions:
		return &indexLimitError{fmt.Sprintf("it lists more than %d chart versions (MaxIndexVersions), the most Capstan reads from one index", MaxIndexVersions)}
	case charts > MaxIndexVersions:
		return &indexLimitError{fmt.Sprintf("it lists more than %d charts (MaxIndexVersions), the most Capstan reads from one index", MaxIndexVersions)}
	}
	return nil
}

// keptBytes counts what a parsed index keeps as it is built, and refuses
// it past MaxIndexKeptBytes.
type keptBytes int64

func (b *keptBytes) add(n int64) error {
	if *b += keptBytes(n); *b > MaxIndexKeptBytes {
		return &indexLimitError{fmt.Sprintf("what Capstan keeps of its versions would take more than %d bytes, the most it keeps of one index", MaxIndexKeptBytes)}
	}
	return nil
}

// keep is what Capstan keeps of a version listed in an index: nothing of
// one that is empty or fails validation (see indexEntryError), and of the
// rest what slim keeps.
func keep(cv *repo.ChartVersion) *repo.ChartVersion {
	if cv == nil || cv.Metadata == nil {
		return nil
	}
	if cv.APIVersion == "" {
		cv.APIVersion = chartv2.APIVersionV1
	}
	if indexEntryError(cv) != nil {
		return nil
	}
	return slim(cv)
}

// slim keeps of a version what resolving and fetching it read (its name,
// version, chart API version, URLs and digest) and what a person would
// ask about (app version, deprecation, creation), and lets the rest go:
// descriptions, keywords, maintainers, annotations and dependencies are
// most of an index's size, and a cached index is kept for minutes.
func slim(cv *repo.ChartVersion) *repo.ChartVersion {
	md := cv.Metadata
	return &repo.ChartVersion{
		Metadata: &chartv2.Metadata{Name: md.Name, Version: md.Version, APIVersion: md.APIVersion, AppVersion: md.AppVersion,
			Deprecated: md.Deprecated, KubeVersion: md.KubeVersion, Type: md.Type},
		URLs: cv.URLs, Created: cv.Created, Removed: cv.Removed, Digest: cv.Digest,
	}
}

// retainedSize is about the memory a parsed, slimmed index holds: its
// strings, and a fixed cost per version for the structures around them.
func retainedSize(idx *repo.IndexFile) int64 {
	n := int64(0)
	for name, cvs := range idx.Entries {
		n += chartSize(name)
		for _, cv := range cvs {
			n += versionSize(cv)
		}
	}
	return n
}

// chartSize is about the memory a chart's name takes in a parsed index.
func chartSize(name string) int64 { return int64(len(name)) + 64 }

// versionSize is about the memory one slimmed version takes.
func versionSize(cv *repo.ChartVersion) int64 {
	const perVersion = 400
	n := perVersion + int64(len(cv.Name)+len(cv.Version)+len(cv.APIVersion)+len(cv.AppVersion)+len(cv.KubeVersion)+len(cv.Type)+len(cv.Digest))
	for _, u := range cv.URLs {
		n += int64(len(u)) + 16
	}
	return n
}

// parseCutIndex parses an index laid out as Helm writes one, one version
// at a time, or says why it cannot. With kept, each version is kept (see
// keep) as soon as it is decoded, so the parse holds what the index keeps
// and one version's text, not everything the index lists; without, each
// is kept as decoded, as a whole parse gives it, for comparing with one.
func parseCutIndex(ctx context.Context, data []byte, kept bool) (*repo.IndexFile, error) {
	// NOTE: the cut alone, which decodes nothing and copies nothing, goes
	// first: an index that lists more than Capstan reads is refused before
	// any version is decoded.
	charts, versions := 0, 0
	rest, err := cutIndex(data, func(string) error {
		charts++
		return tooMany(charts, versions)
	}, func(chart string, text []byte) error {
		versions++
		if err := tooMany(charts, versions); err != nil {
			return err
		}
		if len(text) > MaxIndexEntryBytes {
			return fmt.Errorf("a version of chart %q takes %d bytes, over the %d Capstan reads for one", chart, len(text), MaxIndexEntryBytes)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	idx := &repo.IndexFile{}
	if err := yaml.Unmarshal(rest, idx); err != nil {
		return nil, err
	}
	if len(idx.Entries) > 0 {
		return nil, errors.New("entries is given twice")
	}
	idx.Entries = make(map[string]repo.ChartVersions, charts)
	var b keptBytes
	_, err = cutIndex(data, func(name string) error {
		// NOTE: a name given twice keeps its last list, as a whole parse
		// of a YAML map does.
		idx.Entries[name] = nil
		return b.add(chartSize(name))
	}, func(chart string, text []byte) error {
		// NOTE: checked before each version, however few: a version's
		// text may take up to MaxIndexEntryBytes, and its decode tens of
		// milliseconds, next to which the check costs nothing.
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("stopped parsing it: %w", err)
		}
		var one []*repo.ChartVersion
		if err := yaml.Unmarshal(text, &one); err != nil {
			return err
		}
		if len(one) != 1 {
			return fmt.Errorf("a version of chart %q is %d items", chart, len(one))
		}
		cv := one[0]
		if kept {
			if cv = keep(cv); cv == nil {
				return nil
			}
			if err := b.add(versionSize(cv)); err != nil {
				return err
			}
		}
		idx.Entries[chart] = append(idx.Entries[chart], cv)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return idx, nil
}

// cutIndex cuts an index laid out as Helm writes one: it calls chart with
// each chart's name and version with the text of each of its versions, a
// part of data, in the order they come, and returns the rest of the file.
// It refuses anything else; the caller then parses the file whole. An
// error of chart or version stops the cut and is returned.
func cutIndex(data []byte, chart func(name string) error, version func(chart string, text []byte) error) ([]byte, error) {
	// NOTE: a whole parse refuses text that is not UTF-8, or holds a
	// character YAML does not allow, wherever it is, comments included,
	// which the cut leaves out between versions; and YAML breaks lines
	// where the cut, which reads lines by their line feeds, would not.
	if !cuttableText(data) {
		return nil, errors.New("it is not UTF-8 text that YAML allows, with lines ended by line feeds")
	}
	var rest bytes.Buffer
	// in is 0 outside entries, 1 inside; keyIndent is the charts' names'
	// indentation, itemIndent the current chart's items'.
	in, keyIndent, itemIndent := 0, -1, -1
	// name is the current chart's; the current item is data[itemStart:itemEnd],
	// none when itemStart < 0.
	name, itemStart, itemEnd := "", -1, -1
	flush := func() error {
		if itemStart < 0 {
			return nil
		}
		text := data[itemStart:itemEnd]
		itemStart = -1
		return version(name, text)
	}
	seenEntries, seenTop, haveChart := false, false, false
	for pos := 0; pos < len(data); {
		start, end := pos, len(data)
		if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
			end = pos + i + 1
		}
		line := data[start:end]
		pos = end
		body := bytes.TrimRight(line, " \r\n")
		indent := len(body) - len(bytes.TrimLeft(body, " "))
		text := body[indent:]
		if bytes.HasPrefix(text, []byte("\t")) {
			return nil, errors.New("a line is indented with a tab")
		}
		blank := len(text) == 0 || text[0] == '#'
		if indent > 0 && !blank && !seenTop {
			return nil, errors.New("its top level is indented")
		}
		if indent == 0 && !blank {
			seenTop = true
			switch {
			case text[0] == '%' || bytes.HasPrefix(text, []byte("---")) || bytes.HasPrefix(text, []byte("...")):
				return nil, errors.New("it has YAML directives or several documents")
			case string(text) == "entries:":
				if seenEntries {
					return nil, errors.New("entries is given twice")
				}
				// NOTE: kept in the rest, with no value, so that the rest
				// parses as the whole file's top level does.
				seenEntries, in = true, 1
				rest.Write(line)
				continue
			case text[0] == ' ' || text[0] == '-' || text[0] == '{' || text[0] == '[':
				return nil, errors.New("its top level is not a block mapping")
			}
			if in == 1 {
				if err := flush(); err != nil {
					return nil, err
				}
				in = 0
			}
		}
		if in == 0 || blank {
			if in == 0 {
				if rest.Len()+len(line) > MaxWholeIndexBytes {
					return nil, fmt.Errorf("its fields besides entries take more than %d bytes", MaxWholeIndexBytes)
				}
				rest.Write(line)
			} else if itemStart >= 0 {
				itemEnd = end
			}
			continue
		}
		if keyIndent < 0 {
			keyIndent = indent
		}
		switch {
		case indent == keyIndent && !bytes.HasPrefix(text, []byte("-")):
			key, ok := plainKey(text)
			if !ok {
				return nil, fmt.Errorf("a chart's name is not a plain key: %q", text)
			}
			if err := flush(); err != nil {
				return nil, err
			}
			if err := chart(key); err != nil {
				return nil, err
			}
			name, haveChart, itemIndent = key, true, -1
		case !haveChart || indent < keyIndent:
			return nil, errors.New("a line in entries belongs to no chart")
		case itemIndent < 0 || indent == itemIndent:
			if !bytes.HasPrefix(text, []byte("- ")) && string(text) != "-" {
				return nil, errors.New("a chart's versions are not a block list")
			}
			if err := flush(); err != nil {
				return nil, err
			}
			itemIndent = indent
			itemStart, itemEnd = start, end
		case indent > itemIndent && itemStart >= 0:
			itemEnd = end
		default:
			return nil, errors.New("a line in entries is neither a chart nor a version")
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if !seenEntries {
		return nil, errors.New("it has no top-level entries key")
	}
	return rest.Bytes(), nil
}

// plainKey is the key of a line `name:`, when it is a plain YAML scalar
// that means itself: no quotes, no indicators, nothing that YAML would read
// as another type or as more than a key.
func plainKey(text []byte) (string, bool) {
	if len(text) < 2 || text[len(text)-1] != ':' {
		return "", false
	}
	key := text[:len(text)-1]
	for i, c := range key {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || (c == '-' && i > 0)
		if !ok {
			return "", false
		}
	}
	// NOTE: a name that YAML 1.1 reads as a boolean, a null or a number is
	// a key of that type in the whole parse; such an index is parsed
	// whole.
	var v any
	if err := yaml.Unmarshal(append(append([]byte(nil), key...), ":"...), &v); err != nil {
		return "", false
	}
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", false
	}
	if _, ok := m[string(key)]; !ok {
		return "", false
	}
	return string(key), true
}

// cuttableText reports whether data is UTF-8 of the characters YAML allows
// in a stream (tab, line feed, carriage return and the printable ones), and
// breaks lines only at line feeds: no carriage return alone, and none of
// the line breaks YAML 1.1 also knows (next line, line and paragraph
// separators).
func cuttableText(data []byte) bool {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return false
		case r == '\r':
			if i+1 >= len(data) || data[i+1] != '\n' {
				return false
			}
		case r == '\t' || r == '\n':
		case r < 0x20 || r >= 0x7f && r < 0xa0 || r >= 0xd800 && r < 0xe000 || r == 0xfffe || r == 0xffff || r == 0x2028 || r == 0x2029:
			return false
		}
		i += size
	}
	return true
}
