package source

import (
	"bytes"
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
// entries, JSON) is parsed whole, and only up to MaxWholeIndexBytes.
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
	MaxWholeIndexBytes = 8 << 20
)

// parseIndex reads index.yaml as Helm does: entries that fail validation are
// dropped (see indexEntryError), versions are sorted newest first, and what
// Capstan never reads of a version is let go.
func parseIndex(data []byte) (*repo.IndexFile, error) {
	if len(data) == 0 {
		return nil, errors.New("it is empty")
	}
	idx, err := parseCutIndex(data)
	if err != nil {
		if len(data) > MaxWholeIndexBytes {
			return nil, fmt.Errorf("it is %d bytes and not laid out as Helm writes an index (a top-level entries: with one - item per version), and Capstan reads such an index only up to %d bytes: %v", len(data), MaxWholeIndexBytes, err)
		}
		idx = &repo.IndexFile{}
		if err := yaml.Unmarshal(data, idx); err != nil {
			return nil, fmt.Errorf("it is not valid YAML: %v", err)
		}
	}
	if idx.APIVersion == "" {
		return nil, errors.New("it has no apiVersion")
	}
	for name, cvs := range idx.Entries {
		kept := cvs[:0]
		for _, cv := range cvs {
			if cv == nil || cv.Metadata == nil {
				continue
			}
			if cv.APIVersion == "" {
				cv.APIVersion = chartv2.APIVersionV1
			}
			if indexEntryError(cv) != nil {
				continue
			}
			kept = append(kept, slim(cv))
		}
		idx.Entries[name] = kept
	}
	idx.SortEntries()
	return idx, nil
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
	const perVersion = 400
	n := int64(0)
	for name, cvs := range idx.Entries {
		n += int64(len(name)) + 64
		for _, cv := range cvs {
			n += perVersion + int64(len(cv.Name)+len(cv.Version)+len(cv.APIVersion)+len(cv.AppVersion)+len(cv.KubeVersion)+len(cv.Type)+len(cv.Digest))
			for _, u := range cv.URLs {
				n += int64(len(u)) + 16
			}
		}
	}
	return n
}

// parseCutIndex parses an index laid out as Helm writes one, one version
// at a time, or says why it cannot.
func parseCutIndex(data []byte) (*repo.IndexFile, error) {
	cut, err := cutIndex(data)
	if err != nil {
		return nil, err
	}
	if len(cut.rest) > MaxWholeIndexBytes {
		return nil, fmt.Errorf("its fields besides entries take %d bytes", len(cut.rest))
	}
	idx := &repo.IndexFile{}
	if err := yaml.Unmarshal(cut.rest, idx); err != nil {
		return nil, err
	}
	if len(idx.Entries) > 0 {
		return nil, errors.New("entries is given twice")
	}
	idx.Entries = make(map[string]repo.ChartVersions, len(cut.charts))
	for _, c := range cut.charts {
		// NOTE: a name given twice keeps its last list, as a whole parse
		// of a YAML map does.
		cvs := make(repo.ChartVersions, 0, len(c.versions))
		for _, v := range c.versions {
			if len(v) > MaxIndexEntryBytes {
				return nil, fmt.Errorf("a version of chart %q takes %d bytes, over the %d Capstan reads for one", c.name, len(v), MaxIndexEntryBytes)
			}
			var one []*repo.ChartVersion
			if err := yaml.Unmarshal(v, &one); err != nil {
				return nil, err
			}
			if len(one) != 1 {
				return nil, fmt.Errorf("a version of chart %q is %d items", c.name, len(one))
			}
			cvs = append(cvs, one[0])
		}
		idx.Entries[c.name] = cvs
	}
	return idx, nil
}

// cutIndexResult is an index cut by its lines: each chart's versions, each
// the text of one list item, and the rest of the file.
type cutIndexResult struct {
	charts []cutChart
	rest   []byte
}

type cutChart struct {
	name     string
	versions [][]byte
}

// cutIndex cuts an index laid out as Helm writes one. It refuses anything
// else; the caller then parses the file whole.
func cutIndex(data []byte) (*cutIndexResult, error) {
	// NOTE: a whole parse refuses text that is not UTF-8, or holds a
	// character YAML does not allow, wherever it is, comments included,
	// which the cut leaves out between versions; and YAML breaks lines
	// where the cut, which reads lines by their line feeds, would not.
	if !cuttableText(data) {
		return nil, errors.New("it is not UTF-8 text that YAML allows, with lines ended by line feeds")
	}
	out := &cutIndexResult{}
	var rest bytes.Buffer
	// in is 0 outside entries, 1 inside; keyIndent is the charts' names'
	// indentation, itemIndent the current chart's items'.
	in, keyIndent, itemIndent := 0, -1, -1
	var chart *cutChart
	var item []byte
	flush := func() {
		if item != nil {
			chart.versions = append(chart.versions, item)
			item = nil
		}
	}
	seenEntries, seenTop := false, false
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
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
				flush()
				in = 0
			}
		}
		if in == 0 || blank {
			if in == 0 {
				rest.Write(line)
			} else if item != nil {
				item = append(item, line...)
			}
			continue
		}
		if keyIndent < 0 {
			keyIndent = indent
		}
		switch {
		case indent == keyIndent && !bytes.HasPrefix(text, []byte("-")):
			name, ok := plainKey(text)
			if !ok {
				return nil, fmt.Errorf("a chart's name is not a plain key: %q", text)
			}
			if chart != nil {
				flush()
			}
			out.charts = append(out.charts, cutChart{name: name})
			chart, itemIndent = &out.charts[len(out.charts)-1], -1
		case chart == nil || indent < keyIndent:
			return nil, errors.New("a line in entries belongs to no chart")
		case itemIndent < 0 || indent == itemIndent:
			if !bytes.HasPrefix(text, []byte("- ")) && string(text) != "-" {
				return nil, errors.New("a chart's versions are not a block list")
			}
			flush()
			itemIndent = indent
			item = append([]byte(nil), line...)
		case indent > itemIndent && item != nil:
			item = append(item, line...)
		default:
			return nil, errors.New("a line in entries is neither a chart nor a version")
		}
	}
	flush()
	if !seenEntries {
		return nil, errors.New("it has no top-level entries key")
	}
	out.rest = rest.Bytes()
	return out, nil
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
