package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesAndCleansUp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	if err := WriteFile(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "two" {
		t.Fatalf("content %q, want two", b)
	}
	// A failing writer leaves the old content and no temporary file.
	boom := errors.New("boom")
	if err := Write(p, func(w io.Writer) error { w.Write([]byte("partial")); return boom }); !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "two" {
		t.Fatalf("content %q after failed write, want two", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only f.json", len(entries))
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, want 0644", st.Mode().Perm())
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x"), nil); err == nil {
		t.Fatal("write into a missing directory: no error")
	}
}

// TestCheckWritable: a path Write can write passes and leaves nothing behind; one it
// cannot is one error naming the path and why.
func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{filepath.Join(dir, "new.json"), file} {
		if err := CheckWritable(ok); err != nil {
			t.Errorf("CheckWritable(%q) = %v, want nil", ok, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries after the checks, want only file", len(entries))
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "missing", "r.json"): "cannot write " + filepath.Join(dir, "missing", "r.json") + ": no such file or directory",
		filepath.Join(file, "r.json"):           "cannot write " + filepath.Join(file, "r.json") + ": not a directory",
		dir:                                     dir + " is a directory",
	} {
		if err := CheckWritable(path); err == nil || err.Error() != want {
			t.Errorf("CheckWritable(%q) = %v, want %q", path, err, want)
		}
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(ro, "r.json")
		if err := CheckWritable(p); err == nil || err.Error() != "cannot write "+p+": permission denied" {
			t.Errorf("CheckWritable(read-only dir) = %v", err)
		}
	}
}

func TestCheckDirCreatable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dir, want string
	}{
		{"existing", dir, ""},
		{"two levels to make", filepath.Join(dir, "a", "b"), ""},
		{"under a file", filepath.Join(file, "a", "b"), "cannot make " + filepath.Join(file, "a", "b") + ": " + file + " is not a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckDirCreatable(c.dir)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(dir, "a")); err == nil {
					t.Fatal("CheckDirCreatable made a directory")
				}
				return
			}
			if err == nil || err.Error() != c.want {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%s holds %v after the checks, want only the file", dir, entries)
	}
}
