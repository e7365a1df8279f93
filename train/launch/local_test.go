package launch

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPrefixer: the other ranks' lines arrive whole, prefixed, however they are cut.
func TestPrefixer(t *testing.T) {
	var out bytes.Buffer
	p := &prefixer{w: &out}
	r1, r2 := p.rank(1), p.rank(2)
	r1.Write([]byte("distributed: rank 1 "))
	r2.Write([]byte("[ring] Socket 7 was closed by the peer\nhalf"))
	r1.Write([]byte("of 2 joined\n"))
	r2.Write([]byte(" a line"))
	p.flush()
	want := "[rank 2] [ring] Socket 7 was closed by the peer\n[rank 1] distributed: rank 1 of 2 joined\n[rank 2] half a line\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// TestLocalRun starts three ranks of a shell script: each gets its MLX_RANK and the same
// hostfile, which Detect reads as a ring of three on 127.0.0.1 with distinct ports; their
// stdout passes through, ranks 1 and 2's stderr comes prefixed, the hostfile is removed
// afterwards, and the failing rank's exit code is the launch's.
func TestLocalRun(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	stdout, stderr := createFile(t, filepath.Join(dir, "stdout")), createFile(t, filepath.Join(dir, "stderr"))
	script := `echo "rank $MLX_RANK $MLX_HOSTFILE $(cat "$MLX_HOSTFILE")"; echo "note of $MLX_RANK" >&2; [ "$MLX_RANK" = 2 ] && exit 3; exit 0`
	err = Local{Ranks: 3, Exe: sh, Args: []string{"-c", script}, Stdout: stdout, Stderr: stderr}.Run(context.Background())
	var failed *ExitError
	if !errors.As(err, &failed) || failed.Code != 3 || !slices.Equal(failed.Failures, []string{"rank 2: exit status 3"}) {
		t.Fatalf("Run = %v, want an ExitError of rank 2 with code 3", err)
	}
	if got := err.Error(); got != "--launch: rank 2: exit status 3" {
		t.Errorf("error %q", got)
	}
	lines := strings.Split(strings.TrimSpace(readFile(t, stdout.Name())), "\n")
	slices.Sort(lines)
	if len(lines) != 3 {
		t.Fatalf("stdout %q, want one line per rank", lines)
	}
	var hostfile, hosts string
	for r, line := range lines {
		f := strings.SplitN(line, " ", 4)
		if len(f) != 4 || f[0] != "rank" || f[1] != strconv.Itoa(r) || (r > 0 && (f[2] != hostfile || f[3] != hosts)) {
			t.Fatalf("stdout line %q: want rank %d with the hostfile of rank 0 (%s %s)", line, r, hostfile, hosts)
		}
		hostfile, hosts = f[2], f[3]
	}
	if _, err := os.Stat(hostfile); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("hostfile %s left behind: %v", hostfile, err)
	}
	copied := filepath.Join(dir, "hosts.json")
	if err := os.WriteFile(copied, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := Detect("", func(k string) string { return map[string]string{"MLX_RANK": "1", "MLX_HOSTFILE": copied}[k] })
	if err != nil || w.Backend != "ring" || w.Size != 3 || w.Rank != 1 || len(w.Addrs) != 3 {
		t.Fatalf("Detect on the hostfile %s = %+v, %v", hosts, w, err)
	}
	ports := map[string]bool{}
	for _, a := range w.Addrs {
		host, port, _ := net.SplitHostPort(a)
		if host != "127.0.0.1" || ports[port] {
			t.Errorf("address %s: want 127.0.0.1 and a port of its own (%s)", a, hosts)
		}
		ports[port] = true
	}
	errLines := strings.Split(strings.TrimSpace(readFile(t, stderr.Name())), "\n")
	slices.Sort(errLines)
	if want := []string{"[rank 1] note of 1", "[rank 2] note of 2", "note of 0"}; !slices.Equal(errLines, want) {
		t.Errorf("stderr %q, want %q", errLines, want)
	}
}

func createFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
