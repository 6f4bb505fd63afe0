// Package shape checks the repository's own shape: the limits docs/architecture.md
// promises (file and layer sizes, no package comment that excuses its size) and a README
// whose index names every documentation page and every make target.
package shape

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The limits docs/architecture.md states.
const (
	maxFileLines    = 700  // any non-test, non-generated Go file
	maxCLILines     = 2000 // cmd/ and internal/cmd/ together
	maxSandboxLines = 8000 // internal/sandbox and its subpackages
)

// root is the repository's top directory, two levels above this package.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repository root not found at %s: %v", dir, err)
	}
	return dir
}

// goFiles returns the non-test Go files below dir (relative to the repository root),
// leaving out generated ones and the separate tool modules under hack/tools.
func goFiles(t *testing.T, top, dir string) map[string]int {
	t.Helper()
	lines := map[string]int{}
	repo := os.DirFS(top)
	err := filepath.WalkDir(filepath.Join(top, dir), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(top, path)
		if d.IsDir() {
			if rel == filepath.Join("hack", "tools") || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasPrefix(d.Name(), "zz_generated") {
			return nil
		}
		data, err := fs.ReadFile(repo, rel)
		if err != nil {
			return err
		}
		lines[rel] = bytes.Count(data, []byte("\n"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func TestFileSizes(t *testing.T) {
	files := goFiles(t, root(t), ".")
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if n := files[name]; n > maxFileLines {
			t.Errorf("%s has %d lines; split it (the limit is %d)", name, n, maxFileLines)
		}
	}
}

func TestLayerSizes(t *testing.T) {
	top := root(t)
	cli := sum(goFiles(t, top, "cmd")) + sum(goFiles(t, top, filepath.Join("internal", "cmd")))
	if cli >= maxCLILines {
		t.Errorf("cmd/ and internal/cmd/ hold %d lines; the CLI layer stays under %d (move the work into the package that owns it)", cli, maxCLILines)
	}
	if n := sum(goFiles(t, top, filepath.Join("internal", "sandbox"))); n >= maxSandboxLines {
		t.Errorf("internal/sandbox holds %d lines; it only orchestrates and stays under %d", n, maxSandboxLines)
	}
}

// apology matches a package comment that explains its own size instead of splitting.
var apology = regexp.MustCompile(`(?i)\b(is|are) (over|more than) [0-9,]+ lines\b`)

func TestNoSizeApologies(t *testing.T) {
	top := root(t)
	for name := range goFiles(t, top, ".") {
		f, err := os.Open(filepath.Join(top, name))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			if line := sc.Text(); strings.HasPrefix(strings.TrimSpace(line), "//") && apology.MatchString(line) {
				t.Errorf("%s:%d excuses its size (%q): split the file or package instead", name, n, strings.TrimSpace(line))
			}
		}
		_ = f.Close()
	}
}

// TestREADMEIndex keeps the README's index whole: every page under docs/ is linked, and
// every make target that `make help` lists is named.
func TestREADMEIndex(t *testing.T) {
	top := root(t)
	readme, err := os.ReadFile(filepath.Join(top, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(top, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages {
		link := "(docs/" + filepath.Base(page) + ")"
		if !bytes.Contains(readme, []byte(link)) {
			t.Errorf("README.md does not link docs/%s; add it to the documentation index", filepath.Base(page))
		}
	}
	makefile, err := os.ReadFile(filepath.Join(top, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	target := regexp.MustCompile(`(?m)^([a-zA-Z_-]+):.*## `)
	found := target.FindAllSubmatch(makefile, -1)
	if len(found) == 0 {
		t.Fatal("no documented targets found in the Makefile")
	}
	for _, m := range found {
		if name := string(m[1]); !bytes.Contains(readme, []byte("`make "+name)) {
			t.Errorf("README.md does not name `make %s`; add it to the make target table", name)
		}
	}
}
