package tests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// exportedNames counts a package's public surface: its exported top-level
// names (each constant, variable, type and function) and the exported
// methods of its exported types, in non-test files. It is the figure
// docs/architecture.md's "Public surface" table records.
func exportedNames(t *testing.T, dir string) int {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	n := 0
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && (d.Recv == nil || receiverExported(d.Recv.List[0].Type)) {
					n++
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							n++
						}
					case *ast.ValueSpec:
						for _, name := range s.Names {
							if name.IsExported() {
								n++
							}
						}
					}
				}
			}
		}
	}
	return n
}

func receiverExported(e ast.Expr) bool {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}

// surfaceRow is a row of docs/architecture.md's "Public surface" table:
// | `package` | N |.
var surfaceRow = regexp.MustCompile("^\\| `([a-z/]+)` \\| (\\d+) \\|")

// TestSurface_documented: every public package's surface is at most the
// figure docs/architecture.md records for it, every public package has a
// row, and the total besides storage is the documented total. A change
// that grows the API updates the table in the same commit (and says why);
// one that shrinks it lowers the figure, so the ceiling follows.
func TestSurface_documented(t *testing.T) {
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	total := -1
	for _, line := range strings.Split(string(doc), "\n") {
		if m := surfaceRow.FindStringSubmatch(line); m != nil {
			rows[m[1]], _ = strconv.Atoi(m[2])
		}
		if rest, ok := strings.CutPrefix(line, "| all public packages besides `storage` | "); ok {
			total, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " |"))
		}
	}
	public := []string{"abi", "abi/abitest", "abi/assemblyscript", "abi/c", "abi/params", "abi/sdk", "client", "host", "host/api", "host/worker", "plugins", "policies", "storage"}
	sum := 0
	for _, p := range public {
		want, ok := rows[p]
		if !ok {
			t.Errorf("docs/architecture.md's surface table has no row for %s", p)
			continue
		}
		got := exportedNames(t, "../"+p)
		if got > want {
			t.Errorf("%s exports %d names, more than the %d docs/architecture.md records: shrink it, or raise the figure and say why", p, got, want)
		}
		if got < want {
			t.Errorf("%s exports %d names, fewer than the %d docs/architecture.md records: lower the figure", p, got, want)
		}
		if p != "storage" {
			sum += got
		}
	}
	if sum != total {
		t.Errorf("the public packages besides storage export %d names; docs/architecture.md says %d", sum, total)
	}
	if len(rows) != len(public) {
		t.Errorf("docs/architecture.md's surface table has %d rows, want %d (one per public package)", len(rows), len(public))
	}
}
