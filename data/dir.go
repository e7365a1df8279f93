package data

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Split is one file of a data directory, read into examples.
type Split struct {
	Name     string // "train", "valid" or "test"
	Path     string // the file it was read from
	Examples []Example
	Stats    Stats
}

// Dataset is a loaded data directory. Valid and Test are nil when their files are absent.
type Dataset struct {
	Dir                string
	Train, Valid, Test *Split
}

// Split returns the named split, or an error naming the directory if it is absent.
func (d *Dataset) Split(name string) (*Split, error) {
	var s *Split
	switch name {
	case "train":
		s = d.Train
	case "valid":
		s = d.Valid
	case "test":
		s = d.Test
	default:
		return nil, fmt.Errorf("data: unknown split %q (want train, valid or test)", name)
	}
	if s == nil {
		return nil, fmt.Errorf("data: no %s.jsonl or %s.parquet in %q", name, name, d.Dir)
	}
	return s, nil
}

// Need names the splits a command reads. Required splits must be present and hold at
// least one example; Optional splits are read when present. No other file is opened,
// so eval scoring test.jsonl neither needs nor parses train.jsonl.
type Need struct {
	Required, Optional []string
}

// LoadDir reads the train split and, when present, the valid and test splits of dir.
// An absent or empty train split is an error; valid and test may be empty.
func LoadDir(dir string, opts Options) (*Dataset, error) {
	return Load(dir, opts, Need{Required: []string{"train"}, Optional: []string{"valid", "test"}})
}

// Load reads the splits of dir that need names, and nothing else.
func Load(dir string, opts Options, need Need) (*Dataset, error) {
	if _, err := opts.features(); err != nil {
		return nil, err
	}
	required := map[string]bool{}
	for _, names := range [][]string{need.Required, need.Optional} {
		for _, name := range names {
			if !isSplit(name) {
				return nil, fmt.Errorf("data: unknown split %q (want train, valid or test)", name)
			}
		}
	}
	for _, name := range need.Required {
		required[name] = true
	}
	info, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("data: data directory %q: %w", dir, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("data: data directory: %w", err)
	}
	if !info.IsDir() {
		return nil, NotADirectory(dir)
	}
	d := &Dataset{Dir: dir}
	for _, name := range []string{"train", "valid", "test"} {
		if !required[name] && !slices.Contains(need.Optional, name) {
			continue
		}
		path, err := splitFile(dir, name)
		if err != nil {
			return nil, err
		}
		if path == "" {
			if required[name] {
				return nil, fmt.Errorf("data: no %s.jsonl or %s.parquet in %q", name, name, dir)
			}
			continue
		}
		s, err := ReadFile(path, opts)
		if err != nil {
			return nil, err
		}
		if required[name] && len(s.Examples) == 0 {
			if s.Stats.Skipped > 0 {
				return nil, fmt.Errorf("data: %s has no examples: all %d rows were bad and skipped, the first: %w",
					s.Path, s.Stats.Skipped, s.Stats.Reasons[0])
			}
			return nil, fmt.Errorf("data: %s has no examples", s.Path)
		}
		switch name {
		case "train":
			d.Train = s
		case "valid":
			d.Valid = s
		case "test":
			d.Test = s
		}
	}
	return d, nil
}

// NotADirectory is the error for a data path that names a file: the data is a directory
// of splits (mlx-lm's --data), and the file's directory is probably the one meant.
func NotADirectory(path string) error {
	return fmt.Errorf("data: %s is a file, not a data directory: pass its directory (%s), which holds train, valid and test .jsonl or .parquet", path, filepath.Dir(path))
}

func isSplit(name string) bool { return name == "train" || name == "valid" || name == "test" }

// splitFile finds the file of a split: "" if there is none, an error if both formats
// are present, since preferring one would silently ignore the other.
func splitFile(dir, name string) (string, error) {
	var found []string
	for _, ext := range []string{".jsonl", ".parquet"} {
		p := filepath.Join(dir, name+ext)
		info, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("data: %w", err)
		}
		if info.IsDir() {
			return "", fmt.Errorf("data: %s is a directory, want a file", p)
		}
		found = append(found, p)
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("data: both %s.jsonl and %s.parquet in %q; keep one", name, name, dir)
}

// ReadFile reads one .jsonl or .parquet file into a split named after the file.
func ReadFile(path string, opts Options) (*Split, error) {
	feat, err := opts.features()
	if err != nil {
		return nil, err
	}
	c := &collector{file: path, feat: feat, skip: opts.SkipBadRows}
	base := filepath.Base(path)
	ext := filepath.Ext(base)
	switch strings.ToLower(ext) {
	case ".jsonl":
		err = readJSONL(path, c)
	case ".parquet":
		err = readParquet(path, c)
	default:
		return nil, fmt.Errorf("data: %s: unknown file type %q (want .jsonl or .parquet)", path, ext)
	}
	if err != nil {
		return nil, err
	}
	return &Split{Name: strings.TrimSuffix(base, ext), Path: path, Examples: c.out, Stats: c.stats}, nil
}
