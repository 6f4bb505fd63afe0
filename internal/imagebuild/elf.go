package imagebuild

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// libDirs are where the dynamic loader of a Debian amd64 system looks for libraries.
var libDirs = []string{"lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64", "lib", "usr/lib"}

// CheckLibraries checks that every dynamically linked ELF file in the union of layers
// (later layers over earlier ones) finds its program interpreter and every library it
// names (DT_NEEDED) in the library directories, following symbolic links. The error
// lists what is missing, by file.
func CheckLibraries(layers ...*Layer) error {
	union := map[string]Entry{}
	for _, l := range layers {
		for p, e := range l.entries {
			union[p] = e
		}
	}
	exists := func(p string) bool {
		p = cleanPath(p)
		for range 16 {
			e, ok := union[p]
			if !ok {
				return false
			}
			if e.Type != tar.TypeSymlink {
				return true
			}
			if strings.HasPrefix(e.Linkname, "/") {
				p = cleanPath(e.Linkname)
			} else {
				p = cleanPath(path.Join(path.Dir(p), e.Linkname))
			}
		}
		return false
	}
	var missing []string
	for p, e := range union {
		if e.Type != tar.TypeReg {
			continue
		}
		interp, needed, runpath, err := elfDeps(e)
		if err != nil {
			return fmt.Errorf("reading /%s: %w", p, err)
		}
		dirs := libDirs
		for _, rp := range runpath {
			dirs = append([]string{strings.ReplaceAll(rp, "$ORIGIN", "/"+path.Dir(p))}, dirs...)
		}
		if interp != "" && !exists(interp) {
			missing = append(missing, fmt.Sprintf("/%s: interpreter %s", p, interp))
		}
		for _, lib := range needed {
			found := false
			for _, d := range dirs {
				if exists(path.Join(d, lib)) {
					found = true
					break
				}
			}
			if !found {
				missing = append(missing, fmt.Sprintf("/%s: %s", p, lib))
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("shared libraries missing from the image (add the package that ships them to the pin file): %s", strings.Join(missing, "; "))
	}
	return nil
}

// elfDeps returns an ELF file's program interpreter, DT_NEEDED libraries and
// DT_RUNPATH/DT_RPATH directories; nothing for a file that is not ELF.
func elfDeps(e Entry) (interp string, needed, runpath []string, err error) {
	var r io.ReaderAt
	if e.Source == "" {
		r = bytes.NewReader(e.Data)
	} else {
		f, err := os.Open(e.Source)
		if err != nil {
			return "", nil, nil, err
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	magic := make([]byte, 4)
	if _, err := r.ReadAt(magic, 0); err != nil || string(magic) != elf.ELFMAG {
		return "", nil, nil, nil
	}
	f, err := elf.NewFile(r)
	if err != nil {
		return "", nil, nil, err
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b, err := io.ReadAll(prog.Open())
			if err != nil {
				return "", nil, nil, err
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	needed, err = f.ImportedLibraries()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return "", nil, nil, err
	}
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, err := f.DynString(tag)
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return "", nil, nil, err
		}
		for _, v := range vals {
			runpath = append(runpath, strings.Split(v, ":")...)
		}
	}
	return interp, needed, runpath, nil
}
