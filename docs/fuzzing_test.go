package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestFuzzTargetsAreListed compares the fuzz targets that `make fuzz` runs
// (hack/fuzz.sh finds every func Fuzz… in a _test.go file) with the rows
// of the target table in docs/fuzzing.md, by name and package.
func TestFuzzTargetsAreListed(t *testing.T) {
	fuzzFunc := regexp.MustCompile(`(?m)^func (Fuzz[A-Za-z0-9_]*)\(f \*testing\.F\)`)
	code := map[string]bool{}
	for _, top := range []string{"api", "cmd", "internal", "test"} {
		err := filepath.WalkDir(filepath.Join("..", top), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			pkg := filepath.ToSlash(strings.TrimPrefix(filepath.Dir(path), ".."+string(filepath.Separator)))
			for _, m := range fuzzFunc.FindAllStringSubmatch(string(data), -1) {
				code[m[1]+" "+pkg] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !code["FuzzDecode internal/server/body"] {
		t.Fatalf("the fuzz targets were not found: %v", code)
	}
	data, err := os.ReadFile("fuzzing.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "## The targets")
	end := strings.Index(text[start+1:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("fuzzing.md has no section \"## The targets\"")
	}
	row := regexp.MustCompile("(?m)^\\| `(Fuzz[A-Za-z0-9_]*)` \\| `([^`]+)` \\|")
	listed := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(text[start:start+1+end], -1) {
		listed[m[1]+" "+m[2]] = true
	}
	var missing, stale []string
	for k := range code {
		if !listed[k] {
			missing = append(missing, k)
		}
	}
	for k := range listed {
		if !code[k] {
			stale = append(stale, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(stale)
	if len(missing) > 0 {
		t.Errorf("fuzz targets with no row in fuzzing.md's target table: %s", strings.Join(missing, ", "))
	}
	if len(stale) > 0 {
		t.Errorf("rows of fuzzing.md's target table with no such fuzz target: %s", strings.Join(stale, ", "))
	}
}
