package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/ignore"
)

// Limits bound what a fetched archive or tree may hold.
type Limits struct {
	// MaxArchiveBytes caps a compressed chart archive.
	MaxArchiveBytes int64
	// MaxUncompressedBytes caps the sum of the files of a chart (its
	// subcharts' archives unpacked included, and of an archive what its
	// tar headers take) or of a git tree.
	MaxUncompressedBytes int64
	// MaxFiles caps the number of files; of an archive, every tar entry,
	// folders and pax headers included.
	MaxFiles int
	// MaxDepth caps the number of path elements of one file.
	MaxDepth int
	// MaxIndexBytes caps a chart repository's index.yaml.
	MaxIndexBytes int64
}

// MaxValuesFileBytes bounds a chart's values.yaml and values.schema.json
// (its subcharts' too). Parsing YAML takes some forty times its size in
// memory: a 50 MiB values file took 2 GiB and 8 s to load, which one chart
// must not cost the controller. The largest values files of widely used
// charts are a few hundred KiB.
const MaxValuesFileBytes = 8 << 20

// MaxMetadataFileBytes bounds each file Helm's loader parses as a chart's
// metadata: Chart.yaml, Chart.lock, requirements.yaml and requirements.lock
// (its subcharts' too). A 60 MiB list of keywords took 42 s and 1.9 GiB to
// parse; the metadata of widely used charts is a few KiB.
const MaxMetadataFileBytes = 1 << 20

// MaxParsedBytes bounds the files Helm's loader parses, of one chart and
// all its subcharts together: the loader parses a values.yaml (and the
// metadata files) per subchart, so a chart of twelve subcharts with 8 MiB
// values each, well within MaxUncompressedBytes, would cost the parse of
// twelve, some 320 MB of allocations each, and keep over 400 MB. The
// values of widely used charts, subcharts included, are a few MiB at most.
const MaxParsedBytes = 16 << 20

// parsedKeepFactor is how many times its size a parsed file keeps in
// memory, on top of its bytes, for as long as the loaded chart is cached;
// cachedChart.size counts it. Measured with Helm's loader on 1 to 8 MiB
// values files: 4.1 times for a list of scalars, 4.5 for flat keys, 14 for
// small nested maps and 22 for a flow list of empty maps, the most found.
const parsedKeepFactor = 24

// parsedFileLimit returns the size limit of a chart file that Helm's loader
// parses when it loads the chart, or 0 for a file it keeps as bytes. rel is
// relative to the chart's folder.
func parsedFileLimit(rel string) int64 {
	dir, base := path.Split(rel)
	if !isChartRoot(dir) {
		return 0
	}
	switch base {
	case "values.yaml", "values.schema.json":
		return MaxValuesFileBytes
	case "Chart.yaml", "Chart.lock", "requirements.yaml", "requirements.lock":
		return MaxMetadataFileBytes
	}
	return 0
}

// checkParsedFile refuses a file Helm's loader would parse that is over its
// limit.
func checkParsedFile(rel string, size int64) error {
	limit := parsedFileLimit(rel)
	if limit == 0 || size <= limit {
		return nil
	}
	what := "a chart's metadata file (Chart.yaml, Chart.lock, requirements.yaml, requirements.lock)"
	if limit == MaxValuesFileBytes {
		what = "a values file or schema"
	}
	return &ArchiveError{Problem: fmt.Sprintf("%s is %d bytes, over the limit of %d for %s", rel, size, limit, what)}
}

// DefaultLimits are the limits when Options leaves them zero.
var DefaultLimits = Limits{
	MaxArchiveBytes:      20 << 20,
	MaxUncompressedBytes: 100 << 20,
	MaxFiles:             10000,
	MaxDepth:             32,
	MaxIndexBytes:        64 << 20,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxArchiveBytes > 0 {
		d.MaxArchiveBytes = l.MaxArchiveBytes
	}
	if l.MaxUncompressedBytes > 0 {
		d.MaxUncompressedBytes = l.MaxUncompressedBytes
	}
	if l.MaxFiles > 0 {
		d.MaxFiles = l.MaxFiles
	}
	if l.MaxDepth > 0 {
		d.MaxDepth = l.MaxDepth
	}
	if l.MaxIndexBytes > 0 {
		d.MaxIndexBytes = l.MaxIndexBytes
	}
	return d
}

// ArchiveError is a chart archive that breaks a rule or a limit.
type ArchiveError struct {
	// Entry is the offending tar entry, if any.
	Entry string
	// Problem says what is wrong and what to do.
	Problem string
}

func (e *ArchiveError) Error() string {
	if e.Entry != "" {
		return fmt.Sprintf("chart archive refused: entry %q %s", e.Entry, e.Problem)
	}
	return "chart archive refused: " + e.Problem
}

// maxPrealloc bounds the buffer reserved for one archive entry before its
// bytes are read.
const maxPrealloc = 1 << 20

// budget counts what one chart, subcharts included, has used of the limits.
type budget struct {
	lim   Limits
	files int
	bytes int64
	// parsed is the bytes of the files Helm's loader parses (parsedFileLimit).
	parsed int64
}

// addFile checks a file Helm's loader would parse against its own limit
// and, with the others of the chart, against MaxParsedBytes. rel is
// relative to the folder of the chart or subchart archive being read.
func (b *budget) addFile(rel string, size int64) error {
	if err := checkParsedFile(rel, size); err != nil {
		return err
	}
	if parsedFileLimit(rel) == 0 {
		return nil
	}
	b.parsed += size
	if b.parsed > MaxParsedBytes {
		return &ArchiveError{Problem: fmt.Sprintf("holds more than %d bytes of values files, schemas and metadata files (values.yaml, values.schema.json, Chart.yaml, Chart.lock, requirements.yaml, requirements.lock) in the chart and its subcharts together, the limit, at %s; Helm parses each, at many times its size: slim down the chart's or its subcharts' values",
			MaxParsedBytes, rel)}
	}
	return nil
}

// cacheSize is what a loaded chart from an archive of archiveBytes keeps:
// the archive, its files, and what parsing the parsed ones keeps.
func (b *budget) cacheSize(archiveBytes int) int64 {
	return int64(archiveBytes) + b.bytes + parsedKeepFactor*b.parsed
}

// chartFile is a file of a chart as readArchive checked it.
type chartFile struct {
	*archive.BufferedFile
	// unpacked is, for a subchart's archive, the files readArchive unpacked
	// from it and checked; loadTree loads the subchart from them.
	unpacked []*chartFile
}

// readArchive unpacks a chart archive (.tgz) in memory, enforcing the limits
// and refusing absolute paths, "..", links and special files, before any of it
// reaches Helm's loader. Archives of subcharts under charts/ are checked the
// same way, against the same budget, and come unpacked with them.
func readArchive(data []byte, b *budget) ([]*chartFile, error) {
	return readTar(data, b, false)
}

// readTar is readArchive; subchart is set for a subchart's archive, whose
// entries must name the files as Helm's archive reader does (helmEntryName).
func readTar(data []byte, b *budget, subchart bool) ([]*chartFile, error) {
	if int64(len(data)) > b.lim.MaxArchiveBytes {
		return nil, &ArchiveError{Problem: fmt.Sprintf("is %d bytes, over the limit of %d compressed bytes", len(data), b.lim.MaxArchiveBytes)}
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, &ArchiveError{Problem: fmt.Sprintf("is not a gzip-compressed tar archive (%v); check that the URL serves a chart .tgz", err)}
	}
	defer zr.Close()
	stream := &countingReader{r: zr}
	tr := tar.NewReader(stream)
	var files []*chartFile
	top := ""
	for {
		read := stream.n
		hd, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, corrupt(err)
		}
		// NOTE: every entry counts, folders and pax headers too: they hold
		// none of the chart's bytes, but each is a header to unpack, and
		// two million folder entries fit in a 14 MB archive that took 20 s
		// to read. What the headers took of the stream (pax records, long
		// names and padding included) counts as unpacked bytes.
		b.files++
		if b.files > b.lim.MaxFiles {
			return nil, &ArchiveError{Problem: fmt.Sprintf("holds more than %d files and folders, the limit; every tar entry counts", b.lim.MaxFiles)}
		}
		headers := stream.n - read
		if headers > b.lim.MaxUncompressedBytes-b.bytes {
			return nil, &ArchiveError{Problem: fmt.Sprintf("unpacks to more than %d bytes, the limit", b.lim.MaxUncompressedBytes)}
		}
		b.bytes += headers
		// NOTE: Helm's archive reader splits a name that holds a "\" on "\"
		// alone, so it reads "c/sub\values.yaml" as the chart's values.yaml
		// where "\" read as "/" makes it a file of the folder sub/. Names
		// made on Windows hold only "\" and read the same both ways.
		if strings.Contains(hd.Name, "/") && strings.Contains(hd.Name, `\`) {
			return nil, &ArchiveError{Entry: hd.Name, Problem: `mixes "/" and "\" in its name, which Helm and Capstan would read as different files; package the chart again with one separator ("helm package" uses "/")`}
		}
		name := strings.ReplaceAll(hd.Name, `\`, "/")
		if err := checkEntryName(name, b.lim.MaxDepth); err != nil {
			return nil, err
		}
		switch hd.Typeflag {
		case tar.TypeDir, tar.TypeXGlobalHeader, tar.TypeXHeader:
			continue
		case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // TypeRegA still appears in old archives.
		case tar.TypeSymlink, tar.TypeLink:
			return nil, &ArchiveError{Entry: hd.Name, Problem: "is a link; links are refused in charts, package the file itself"}
		default:
			return nil, &ArchiveError{Entry: hd.Name, Problem: fmt.Sprintf("has tar type %q; only files and folders are allowed", hd.Typeflag)}
		}
		clean := path.Clean(strings.TrimPrefix(name, "./"))
		first, rest, ok := strings.Cut(clean, "/")
		if !ok {
			return nil, &ArchiveError{Entry: hd.Name, Problem: "is not inside the chart's folder; a chart archive holds one top folder named after the chart"}
		}
		if top == "" {
			top = first
		} else if first != top {
			return nil, &ArchiveError{Entry: hd.Name, Problem: fmt.Sprintf("is outside the chart's folder %q; a chart archive holds one top folder", top)}
		}
		if subchart && helmEntryName(hd.Name) != rest {
			return nil, &ArchiveError{Entry: hd.Name, Problem: fmt.Sprintf("is read by Helm as %q and by Capstan as %q; package the subchart with \"helm package\", whose entries start with the chart's folder", helmEntryName(hd.Name), rest)}
		}
		left := b.lim.MaxUncompressedBytes - b.bytes
		if hd.Size > left {
			return nil, &ArchiveError{Problem: fmt.Sprintf("unpacks to more than %d bytes, the limit", b.lim.MaxUncompressedBytes)}
		}
		// NOTE: the header's size is only a claim until the bytes arrive: a
		// few bytes of archive could otherwise make this allocate up to the
		// whole uncompressed limit at once. The buffer grows as they come.
		buf := bytes.NewBuffer(make([]byte, 0, min(hd.Size, maxPrealloc)))
		n, err := io.Copy(buf, io.LimitReader(tr, left+1))
		if err != nil {
			return nil, corrupt(err)
		}
		if n > left {
			return nil, &ArchiveError{Problem: fmt.Sprintf("unpacks to more than %d bytes, the limit", b.lim.MaxUncompressedBytes)}
		}
		b.bytes += n
		if err := b.addFile(rest, n); err != nil {
			return nil, err
		}
		content := bytes.TrimPrefix(buf.Bytes(), []byte{0xEF, 0xBB, 0xBF})
		f := &chartFile{BufferedFile: &archive.BufferedFile{Name: rest, ModTime: hd.ModTime, Data: content}}
		if isSubchartArchive(rest) {
			if f.unpacked, err = readTar(content, b, true); err != nil {
				return nil, fmt.Errorf("subchart %s: %w", rest, err)
			}
		}
		files = append(files, f)
	}
	// NOTE: gzip only checks its trailer when read to the end; tar stops at
	// its end-of-archive marker, so drain the rest to catch a truncated stream.
	if _, err := io.Copy(io.Discard, io.LimitReader(zr, 1<<20)); err != nil {
		return nil, corrupt(err)
	}
	if len(files) == 0 {
		return nil, &ArchiveError{Problem: "holds no files"}
	}
	return files, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func corrupt(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &ArchiveError{Problem: "is truncated; fetch it again or check the server"}
	}
	return &ArchiveError{Problem: fmt.Sprintf("is corrupt (%v); fetch it again or check the server", err)}
}

// checkEntryName refuses absolute paths, drive letters, ".." elements,
// control characters and bytes that are not UTF-8, and paths deeper than
// maxDepth.
func checkEntryName(name string, maxDepth int) error {
	problem := nameProblem(name)
	switch {
	case name == "":
		return &ArchiveError{Entry: name, Problem: "has no name"}
	case problem != "":
		return &ArchiveError{Entry: name, Problem: problem + "; rename the file and package the chart again"}
	case strings.HasPrefix(name, "/") || (len(name) > 1 && name[1] == ':'):
		return &ArchiveError{Entry: name, Problem: "is an absolute path; chart archives hold relative paths only"}
	}
	parts := strings.Split(strings.Trim(name, "/"), "/")
	for _, p := range parts {
		if p == ".." {
			return &ArchiveError{Entry: name, Problem: `contains ".."; chart archives must not reach outside the chart`}
		}
	}
	if len(parts) > maxDepth {
		return &ArchiveError{Entry: name, Problem: fmt.Sprintf("is %d folders deep, over the limit of %d", len(parts), maxDepth)}
	}
	return nil
}

// nameProblem says what makes a source's file name unfit to be shown, or
// "" when nothing does: a control character (C0, DEL or C1) or bytes that
// are not UTF-8. A file's name is shown in the "# Source:" comments of a
// render and in a plan's notices, where a newline would start a line, or a
// whole YAML document, of the name's making, and an escape sequence would
// rewrite a terminal.
func nameProblem(name string) string {
	if !utf8.ValidString(name) {
		return "has bytes in its name that are not UTF-8"
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Sprintf("has the control character %U in its name", r)
		}
	}
	return ""
}

// isChartRoot reports whether dir, a folder relative to a chart's folder
// ("" or ending in "/"), is one Helm's loader loads as a chart: the chart's
// own, or a subchart folder's, charts/NAME/, however deep.
func isChartRoot(dir string) bool {
	// NOTE: the loader reads the metadata, values and charts/ of a chart
	// there only; a file of the same name elsewhere (templates/, files/)
	// is only bytes to it, and so is a subchart it skips.
	if dir == "" {
		return true
	}
	parts := strings.Split(strings.TrimSuffix(dir, "/"), "/")
	if len(parts)%2 != 0 {
		return false
	}
	for i := 0; i < len(parts); i += 2 {
		if parts[i] != "charts" || skippedSubchart(parts[i+1]) {
			return false
		}
	}
	return true
}

// skippedSubchart reports whether Helm's loader leaves out the entry NAME
// of a chart's charts/ folder, a folder or an archive: it does when the
// name starts with "." or "_".
func skippedSubchart(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// isSubchartArchive reports whether a chart-relative path is a dependency's
// archive, which Helm's loader unpacks: charts/NAME.tgz in the chart's
// folder or a subchart's. A .tgz anywhere else is only a file of the chart.
func isSubchartArchive(rel string) bool {
	dir, file := path.Split(rel)
	if path.Ext(file) != ".tgz" || skippedSubchart(file) {
		return false
	}
	parent, ok := strings.CutSuffix(dir, "charts/")
	return ok && (parent == "" || strings.HasSuffix(parent, "/")) && isChartRoot(parent)
}

// helmEntryName is the name Helm's archive reader (archive.LoadArchiveFiles)
// gives a tar entry: its first element dropped, split on "\" when the name
// holds one and on "/" otherwise.
func helmEntryName(name string) string {
	sep := "/"
	if strings.Contains(name, `\`) {
		sep = `\`
	}
	_, rest, _ := strings.Cut(name, sep)
	return path.Clean(strings.ReplaceAll(rest, sep, "/"))
}

// loadArchive checks and loads chart archive bytes.
func loadArchive(data []byte, lim Limits) (*chartv2.Chart, error) {
	files, err := readArchive(data, &budget{lim: lim})
	if err != nil {
		return nil, err
	}
	return loadFiles(files)
}

// loadFiles loads the files of a chart that readArchive checked, its
// parsed files' sizes included.
func loadFiles(files []*chartFile) (*chartv2.Chart, error) {
	c, err := loadTree(files)
	if err != nil {
		return nil, fmt.Errorf("invalid chart: %w; fix the chart's Chart.yaml and files", err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("invalid chart: %w; fix the chart's Chart.yaml", err)
	}
	return c, nil
}

// loadTree loads a chart and its subcharts from the files readArchive
// checked. Helm's loader gets one chart's own files at a time; loadTree
// groups what is under charts/ into subcharts as that loader does, and loads
// a subchart's archive from the files readArchive unpacked from it.
func loadTree(files []*chartFile) (*chartv2.Chart, error) {
	// NOTE: Helm's loader would unpack a subchart's archive again itself,
	// with a budget of its own per archive: every byte it parses must be one
	// that readArchive counted, so it never gets an archive to unpack.
	own := make([]*archive.BufferedFile, 0, len(files))
	var names []string
	subcharts := map[string][]*chartFile{}
	for _, f := range files {
		fname, ok := strings.CutPrefix(f.Name, "charts/")
		if !ok || path.Ext(f.Name) == ".prov" {
			own = append(own, f.BufferedFile)
			continue
		}
		n, _, _ := strings.Cut(fname, "/")
		if _, seen := subcharts[n]; !seen {
			names = append(names, n)
		}
		subcharts[n] = append(subcharts[n], f)
	}
	c, err := loader.LoadFiles(own)
	if err != nil {
		return nil, err
	}
	c.Raw = make([]*common.File, 0, len(files))
	for _, f := range files {
		c.Raw = append(c.Raw, &common.File{Name: f.Name, ModTime: f.ModTime, Data: f.Data})
	}
	for _, n := range names {
		var sub []*chartFile
		switch group := subcharts[n]; {
		case skippedSubchart(n):
			continue
		case path.Ext(n) == ".tgz":
			if group[0].Name != "charts/"+n {
				return nil, fmt.Errorf("error unpacking subchart tar in %s: expected %s, got %s", c.Name(), n, strings.TrimPrefix(group[0].Name, "charts/"))
			}
			if group[0].unpacked == nil {
				return nil, fmt.Errorf("subchart archive charts/%s in %s was not checked before loading", n, c.Name())
			}
			sub = group[0].unpacked
		default:
			for _, f := range group {
				_, rel, ok := strings.Cut(strings.TrimPrefix(f.Name, "charts/"), "/")
				if !ok {
					continue
				}
				sub = append(sub, &chartFile{BufferedFile: &archive.BufferedFile{Name: rel, ModTime: f.ModTime, Data: f.Data}, unpacked: f.unpacked})
			}
		}
		sc, err := loadTree(sub)
		if err != nil {
			return nil, fmt.Errorf("error unpacking subchart %s in %s: %w", n, c.Name(), err)
		}
		c.AddDependency(sc)
	}
	return c, nil
}

// Digest returns "sha256:<hex>" of data.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// LoadChart loads a local chart folder or .tgz with the same limits as a
// fetched archive. A folder's Digest is the sha256 of its sorted file names
// and contents; an archive's is the sha256 of its bytes.
func LoadChart(p string) (*Chart, error) {
	return LoadChartWithLimits(p, Limits{})
}

// LoadChartWithLimits is LoadChart with explicit limits; zero fields take the defaults.
func LoadChartWithLimits(p string, lim Limits) (*Chart, error) {
	lim = lim.withDefaults()
	// NOTE: Helm's loader cleans the folder's path as text (filepath.Abs),
	// so a/link/../chart is a/chart to it, while the system, following the
	// link first, would open the chart beside the link's target. The path
	// is cleaned the same way once, here, so that the folder checked is
	// the folder Helm's loader reads.
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, fmt.Errorf("cannot read chart %s: %w", p, err)
	}
	p = abs
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("cannot read chart %s: %w", p, err)
	}
	var (
		c      *chartv2.Chart
		digest string
	)
	if fi.IsDir() {
		digest, err = checkChartDir(p, lim)
		if err != nil {
			return nil, fmt.Errorf("chart folder %s: %w", p, err)
		}
		if c, err = loader.LoadDir(p); err != nil {
			return nil, fmt.Errorf("chart folder %s: invalid chart: %w", p, err)
		}
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("chart folder %s: invalid chart: %w", p, err)
		}
	} else {
		if fi.Size() > lim.MaxArchiveBytes {
			return nil, fmt.Errorf("chart archive %s: %w", p, &ArchiveError{Problem: fmt.Sprintf("is %d bytes, over the limit of %d compressed bytes", fi.Size(), lim.MaxArchiveBytes)})
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("cannot read chart %s: %w", p, err)
		}
		if c, err = loadArchive(data, lim); err != nil {
			return nil, fmt.Errorf("chart archive %s: %w", p, err)
		}
		digest = Digest(data)
	}
	return &Chart{Chart: c, Name: c.Name(), Version: c.Metadata.Version, Digest: digest, URL: "file://" + filepath.ToSlash(p)}, nil
}

// maxHelmignoreBytes bounds a chart folder's .helmignore, which Helm's
// loader parses whole and matches against every path of the folder.
// The one helm create writes is some 300 bytes.
const maxHelmignoreBytes = 64 << 10

// maxHelmignoreWork bounds the matching of a chart folder's .helmignore
// rules against its paths, in steps of (bytes of the rules) × (length of
// the path + 1), what filepath.Match may take for each. At the 4 to 6 ns
// a step of the costliest rules measured on the 2-core build machine,
// that is some 3 s; helm create's rules over 10,000 paths of 100 bytes
// count some 150 million steps.
const maxHelmignoreWork = 1 << 29

// chartDirEntriesPerFile times Limits.MaxFiles bounds the files and
// folders a chart folder's walk visits, ignored ones included.
const chartDirEntriesPerFile = 4

// checkChartDir walks a chart folder with the archive limits, as Helm's
// loader (loader.LoadDir) will read it: the folder a link names as the
// chart is followed, .helmignore and Helm's default rules apply, and what
// they leave out is neither counted nor in the digest. A link that leaves
// the folder, and a link to a folder, are refused. It returns a digest of
// the files Helm will load.
func checkChartDir(root string, lim Limits) (string, error) {
	rootAbs, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	rules, err := chartDirIgnoreRules(rootAbs)
	if err != nil {
		return "", err
	}
	// NOTE: what .helmignore leaves out is not loaded, but Helm's loader
	// still visits it and matches every rule against its path, at a cost
	// of up to the rules' length times the path's each: one rule of 64 KiB
	// took 90 ms for each path of 255 bytes, 15 minutes for 10,000 paths.
	// Both are bounded, the visits and the matching.
	maxEntries := chartDirEntriesPerFile * lim.MaxFiles
	var entries int
	var names []string
	contents := map[string][]byte{}
	// NOTE: one budget for the folder and the subchart archives in it, as
	// for a chart archive: what subcharts unpack to counts too.
	b := &budget{lim: lim}
	err = filepath.WalkDir(rootAbs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(rootAbs, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if entries++; entries > maxEntries {
			return &ArchiveError{Problem: fmt.Sprintf("holds more than %d files and folders, ignored ones included, the limit (%d times the %d files); "+
				"list a folder of many ignored files in .helmignore as a folder (name/), whose files are then not visited, or move them out of the chart folder", maxEntries, chartDirEntriesPerFile, lim.MaxFiles)}
		}
		info, leaves, err := chartDirEntry(rootAbs, p, rel, d)
		if err != nil {
			return err
		}
		ignored, err := rules.ignore(rel, info)
		if err != nil {
			return err
		}
		if ignored {
			// Helm's loader skips what .helmignore names, a folder with all in it.
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if leaves {
			return &ArchiveError{Entry: rel, Problem: "is a link that leaves the chart folder"}
		}
		if depth := strings.Count(rel, "/") + 1; depth > lim.MaxDepth {
			return &ArchiveError{Entry: rel, Problem: fmt.Sprintf("is %d folders deep, over the limit of %d", depth, lim.MaxDepth)}
		}
		switch {
		case d.IsDir():
			return nil
		case info.IsDir():
			// NOTE: Helm's loader walks a linked folder as if it were
			// there, with no bound on how often: twenty links to one
			// folder load it twenty times, and links within linked
			// folders multiply. A chart archive, what the controller
			// installs, holds no links at all.
			return &ArchiveError{Entry: rel, Problem: "is a link to a folder, which Capstan does not follow in a chart folder; " +
				"put the folder there instead of the link, list the link in .helmignore, or render the archive helm package makes"}
		case !info.Mode().IsRegular():
			return &ArchiveError{Entry: rel, Problem: "is not a regular file"}
		}
		if b.bytes+info.Size() > lim.MaxUncompressedBytes {
			return &ArchiveError{Problem: fmt.Sprintf("holds more than %d bytes, the limit", lim.MaxUncompressedBytes)}
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		b.files++
		b.bytes += int64(len(data))
		if err := b.addFile(rel, int64(len(data))); err != nil {
			return err
		}
		if b.files > lim.MaxFiles {
			return &ArchiveError{Problem: fmt.Sprintf("holds more than %d files, the limit", lim.MaxFiles)}
		}
		if b.bytes > lim.MaxUncompressedBytes {
			return &ArchiveError{Problem: fmt.Sprintf("holds more than %d bytes, the limit", lim.MaxUncompressedBytes)}
		}
		if isSubchartArchive(rel) {
			// NOTE: Helm's loader unpacks this archive itself; readTar
			// holds its entries to the names that loader reads.
			if _, err := readTar(data, b, true); err != nil {
				return fmt.Errorf("subchart %s: %w", rel, err)
			}
		}
		names = append(names, rel)
		contents[rel] = data
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(contents[n]))
		h.Write(contents[n])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// chartDirEntry returns what Helm's loader sees at p in a chart folder: for
// a link, the file or folder it names, and whether that is outside the
// folder. A broken link fails Helm's loader, ignored or not.
func chartDirEntry(rootAbs, p, rel string, d fs.DirEntry) (fs.FileInfo, bool, error) {
	if d.Type()&fs.ModeSymlink == 0 {
		info, err := d.Info()
		return info, false, err
	}
	target, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, false, &ArchiveError{Entry: rel, Problem: "is a broken link"}
	}
	info, err := os.Stat(target)
	if err != nil {
		return nil, false, err
	}
	r, err := filepath.Rel(rootAbs, target)
	return info, err != nil || r == ".." || strings.HasPrefix(r, "../"), nil
}

// chartDirIgnore is a chart folder's .helmignore rules, with Helm's
// default rules, and the matching work they have taken.
type chartDirIgnore struct {
	rules *ignore.Rules
	// ruleBytes is the length of every rule, plus one each.
	ruleBytes int64
	work      int64
}

// ignore reports whether Helm's loader leaves rel out, or fails once the
// matching of the rules against the folder's paths would pass
// maxHelmignoreWork.
func (r *chartDirIgnore) ignore(rel string, info fs.FileInfo) (bool, error) {
	r.work += r.ruleBytes * int64(len(rel)+1)
	if r.work > maxHelmignoreWork {
		return false, &ArchiveError{Entry: ignore.HelmIgnore, Problem: fmt.Sprintf("has %d bytes of rules, and Helm matches each against every path of the folder: by %s that is over %d steps "+
			"(bytes of the rules times the length of each path), the limit; shorten the rules, or have fewer or shorter paths in the folder "+
			"(a folder listed as name/ is not entered)", r.ruleBytes, rel, maxHelmignoreWork)}
	}
	return r.rules.Ignore(rel, info), nil
}

// chartDirIgnoreRules reads a chart folder's .helmignore as Helm's loader
// does, with Helm's default rules added.
func chartDirIgnoreRules(rootAbs string) (*chartDirIgnore, error) {
	r := &chartDirIgnore{rules: ignore.Empty()}
	p := filepath.Join(rootAbs, ignore.HelmIgnore)
	d, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.rules.AddDefaults()
		r.ruleBytes = int64(len(helmDefaultIgnoreRule) + 1)
		return r, nil
	case err != nil:
		return nil, err
	}
	info, leaves, err := chartDirEntry(rootAbs, p, ignore.HelmIgnore, fs.FileInfoToDirEntry(d))
	switch {
	case err != nil:
		return nil, err
	case leaves:
		return nil, &ArchiveError{Entry: ignore.HelmIgnore, Problem: "is a link that leaves the chart folder"}
	case !info.Mode().IsRegular():
		return nil, &ArchiveError{Entry: ignore.HelmIgnore, Problem: "is not a regular file"}
	case info.Size() > maxHelmignoreBytes:
		return nil, &ArchiveError{Entry: ignore.HelmIgnore, Problem: fmt.Sprintf("is %d bytes, over the limit of %d; Helm matches every rule against every path of the folder", info.Size(), maxHelmignoreBytes)}
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if r.rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
		return nil, &ArchiveError{Entry: ignore.HelmIgnore, Problem: fmt.Sprintf("is not a valid ignore file: %v", err)}
	}
	r.rules.AddDefaults()
	r.ruleBytes = int64(len(helmDefaultIgnoreRule) + 1)
	for line := range strings.Lines(string(data)) {
		// The lines Helm's parser keeps as rules: not blank, not a comment.
		if rule := strings.TrimSpace(line); rule != "" && !strings.HasPrefix(rule, "#") {
			r.ruleBytes += int64(len(rule) + 1)
		}
	}
	return r, nil
}

// helmDefaultIgnoreRule is the rule ignore.Rules.AddDefaults adds.
const helmDefaultIgnoreRule = "templates/.?*"
