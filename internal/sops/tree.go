package sops

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"filippo.io/age"
)

// maxProblems is how many files' problems an error lists.
const maxProblems = 5

// Tree decrypts every YAML and JSON file of fsys that SOPS encrypted, and
// returns fsys with the decrypted files in their places, the values it
// decrypted, and the files it decrypted. A file it cannot decrypt is an
// error that names it; the error never quotes a value. With no encrypted
// file, fsys itself is returned.
func Tree(fsys fs.FS, ids []age.Identity) (fs.FS, []string, []string, error) {
	files := map[string][]byte{}
	var secrets, decrypted, problems []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		switch strings.ToLower(path.Ext(p)) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		if !IsEncrypted(data) || !topLevelSops(data) {
			return nil
		}
		out, found, err := Decrypt(data, ids)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", p, err))
			return nil
		}
		files[p] = out
		secrets = append(secrets, found...)
		decrypted = append(decrypted, p)
		return nil
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("decrypt: read the folder: %w", err)
	}
	if problems != nil {
		more := ""
		if len(problems) > maxProblems {
			more = fmt.Sprintf("; and %d more", len(problems)-maxProblems)
			problems = problems[:maxProblems]
		}
		return nil, nil, nil, errors.New("decrypt: " + strings.Join(problems, "; ") + more)
	}
	if len(files) == 0 {
		return fsys, nil, nil, nil
	}
	return overlay{base: fsys, files: files}, secrets, decrypted, nil
}

// topLevelSops reports whether a line of data starts with the key sops,
// or a JSON object has it: a quick look before the file is parsed.
func topLevelSops(data []byte) bool {
	return bytes.HasPrefix(data, []byte("sops:")) || bytes.Contains(data, []byte("\nsops:")) || bytes.Contains(data, []byte(`"sops":`))
}

// overlay is a file system with some files' contents replaced.
type overlay struct {
	base  fs.FS
	files map[string][]byte
}

func (o overlay) Open(name string) (fs.File, error) {
	data, ok := o.files[name]
	if !ok {
		return o.base.Open(name)
	}
	info, err := fs.Stat(o.base, name)
	if err != nil {
		return nil, err
	}
	return &file{Reader: bytes.NewReader(data), info: sized{FileInfo: info, size: int64(len(data))}}, nil
}

func (o overlay) ReadFile(name string) ([]byte, error) {
	if data, ok := o.files[name]; ok {
		return bytes.Clone(data), nil
	}
	return fs.ReadFile(o.base, name)
}

type file struct {
	*bytes.Reader
	info fs.FileInfo
}

func (f *file) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *file) Close() error               { return nil }

type sized struct {
	fs.FileInfo
	size int64
}

func (s sized) Size() int64 { return s.size }
