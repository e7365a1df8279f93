package atomicfile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// readDir lists the names in dir.
func readDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func mustWrite(t *testing.T, path, body string) {
	t.Helper()
	if err := WriteFile(path, []byte(body)); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStageDirRemove: a removed staging leaves nothing behind, not even the parents
// StageDir created; publishing it afterwards is an error, not an empty directory.
func TestStageDirRemove(t *testing.T) {
	dir := t.TempDir()
	st, err := StageDir(filepath.Join(dir, "a", "b", "out"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := filepath.Dir(st.Path), filepath.Join(dir, "a", "b"); got != want {
		t.Errorf("staged in %s, want beside out in %s", got, want)
	}
	mustWrite(t, filepath.Join(st.Path, "x"), "half")
	st.Remove()
	if names := readDir(t, dir); len(names) != 0 {
		t.Errorf("Remove left %v", names)
	}
	if err := st.Replace(); err == nil {
		t.Error("Replace after Remove: no error")
	}
	if err := st.MoveInto(); err == nil {
		t.Error("MoveInto after Remove: no error")
	}
	if names := readDir(t, dir); len(names) != 0 {
		t.Errorf("publishing a removed staging left %v", names)
	}
}

// TestStageDirReplace: Replace puts the staged directory (mode 0755) where out was —
// absent, empty or full — and leaves nothing else beside it; Remove afterwards is a no-op.
func TestStageDirReplace(t *testing.T) {
	for _, before := range []string{"absent", "empty", "full"} {
		t.Run(before, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			if before != "absent" {
				if err := os.Mkdir(out, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if before == "full" {
				mustWrite(t, filepath.Join(out, "stale"), "old")
			}
			st, err := StageDir(out)
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(st.Path, "x"), "done")
			if err := st.Replace(); err != nil {
				t.Fatal(err)
			}
			st.Remove()
			if got := readDir(t, out); !slices.Equal(got, []string{"x"}) {
				t.Errorf("out holds %v, want [x]", got)
			}
			if got := mustRead(t, filepath.Join(out, "x")); got != "done" {
				t.Errorf("x holds %q, want done", got)
			}
			if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("out: %v %v, want mode 0755", fi, err)
			}
			if got := readDir(t, dir); !slices.Equal(got, []string{"out"}) {
				t.Errorf("parent holds %v, want [out]", got)
			}
		})
	}
}

// TestStageDirMoveInto: MoveInto adds the staged files to out, replacing those of the
// same name and keeping the others; out and its parents are created when missing.
func TestStageDirMoveInto(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(out, "keep"), "mine")
	mustWrite(t, filepath.Join(out, "x"), "old")
	st, err := StageDir(out)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(st.Path, "x"), "new")
	mustWrite(t, filepath.Join(st.Path, "y"), "new")
	if err := st.MoveInto(); err != nil {
		t.Fatal(err)
	}
	st.Remove()
	for name, want := range map[string]string{"keep": "mine", "x": "new", "y": "new"} {
		if got := mustRead(t, filepath.Join(out, name)); got != want {
			t.Errorf("%s holds %q, want %q", name, got, want)
		}
	}
	if got := readDir(t, dir); !slices.Equal(got, []string{"out"}) {
		t.Errorf("parent holds %v, want [out]", got)
	}

	deep := filepath.Join(dir, "p", "q", "out")
	st, err = StageDir(deep)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(st.Path, "z"), "z")
	if err := st.MoveInto(); err != nil {
		t.Fatal(err)
	}
	st.Remove()
	if got := readDir(t, filepath.Dir(deep)); !slices.Equal(got, []string{"out"}) {
		t.Errorf("%s holds %v, want [out]", filepath.Dir(deep), got)
	}
	if got := mustRead(t, filepath.Join(deep, "z")); got != "z" {
		t.Errorf("z holds %q", got)
	}
}

// TestStageDirErrors: a parent that is a file fails StageDir with the file system's error
// and creates nothing.
func TestStageDirErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	mustWrite(t, file, "x")
	if _, err := StageDir(filepath.Join(file, "sub", "out")); err == nil {
		t.Fatal("StageDir under a file: no error")
	}
	if got := readDir(t, dir); !slices.Equal(got, []string{"file"}) {
		t.Errorf("failed StageDir left %v", got)
	}
}

// TestCopy: Copy gives dst src's bytes and mode 0644, and names a missing source.
func TestCopy(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	mustWrite(t, src, "bytes\x00\xff")
	if err := Copy(src, dst); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, dst); got != "bytes\x00\xff" {
		t.Errorf("dst holds %q", got)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o644 {
		t.Errorf("dst mode %v, want 0644", fi.Mode().Perm())
	}
	if err := Copy(filepath.Join(dir, "missing"), filepath.Join(dir, "d2")); !os.IsNotExist(err) {
		t.Errorf("Copy of a missing file: %v, want not-exist", err)
	}
}
