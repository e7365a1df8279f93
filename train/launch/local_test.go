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
	w, err := Detect("", func(k string) string { return map[string]string{"MLX_RANK": "1", "MLX_HOSTFILE": copied}[k] }, nil)
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

// TestLocalRunNCCL starts ranks of a shell script for NCCL and for any, and checks what
// each rank's environment says — as mlx.launch --backend nccl sets it, one GPU per rank,
// NVLink multicast off unless the caller set it — by reading it back with Detect.
func TestLocalRunNCCL(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	const script = `echo "$MLX_RANK|$MLX_WORLD_SIZE|$NCCL_HOST_IP|$NCCL_PORT|$CUDA_VISIBLE_DEVICES|${NCCL_NVLS_ENABLE-unset}|${MLX_HOSTFILE:+hostfile}"`
	// run launches the script and returns each rank's line split at "|", in rank order.
	run := func(t *testing.T, l Local) [][]string {
		t.Helper()
		dir := t.TempDir()
		stdout := createFile(t, filepath.Join(dir, "stdout"))
		l.Exe, l.Args, l.Stdout, l.Stderr = sh, []string{"-c", script}, stdout, createFile(t, filepath.Join(dir, "stderr"))
		if err := l.Run(context.Background()); err != nil {
			t.Fatalf("Run: %v\n%s", err, readFile(t, filepath.Join(dir, "stderr")))
		}
		lines := strings.Split(strings.TrimSpace(readFile(t, stdout.Name())), "\n")
		slices.Sort(lines)
		var rows [][]string
		for r, line := range lines {
			f := strings.Split(line, "|")
			if len(f) != 7 || f[0] != strconv.Itoa(r) {
				t.Fatalf("line %q: want rank %d's", line, r)
			}
			rows = append(rows, f)
		}
		if len(rows) != l.Ranks {
			t.Fatalf("%d lines from %d ranks", len(rows), l.Ranks)
		}
		return rows
	}
	// detect reads a rank's line back as Detect would read that rank's environment.
	detect := func(t *testing.T, distributed string, f []string, hasNCCL bool) World {
		t.Helper()
		env := map[string]string{"MLX_RANK": f[0], "MLX_WORLD_SIZE": f[1], "NCCL_HOST_IP": f[2], "NCCL_PORT": f[3]}
		w, err := Detect(distributed, func(k string) string { return env[k] }, func() bool { return hasNCCL })
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	base := []string{"PATH=" + os.Getenv("PATH"), "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5"}

	t.Run("nccl", func(t *testing.T) {
		rows := run(t, Local{Ranks: 3, Backend: "nccl", Env: base, GPUs: []string{"4", "2", "GPU-5e1a"}})
		for r, f := range rows {
			want := []string{strconv.Itoa(r), "3", "127.0.0.1", rows[0][3], []string{"4", "2", "GPU-5e1a"}[r], "0", ""}
			if !slices.Equal(f, want) {
				t.Errorf("rank %d: %q, want %q (one GPU each, rank 0's port for all, NVLS off, no hostfile)", r, f, want)
			}
			w := detect(t, "nccl", f, false)
			if w.Backend != "nccl" || w.Size != 3 || w.Rank != r || w.Coordinator != "127.0.0.1:"+rows[0][3] {
				t.Errorf("rank %d: Detect = %+v", r, w)
			}
		}
	})
	t.Run("nccl, the caller's NVLS setting and GPUs", func(t *testing.T) {
		// No GPUs given: the caller's CUDA_VISIBLE_DEVICES are handed out in order.
		rows := run(t, Local{Ranks: 2, Backend: "nccl", Env: append(slices.Clip(base), "NCCL_NVLS_ENABLE=1", "CUDA_VISIBLE_DEVICES=6, 7")})
		if rows[0][4] != "6" || rows[1][4] != "7" || rows[0][5] != "1" || rows[1][5] != "1" {
			t.Errorf("ranks %q, want GPUs 6 and 7 and NCCL_NVLS_ENABLE as the caller set it", rows)
		}
	})
	t.Run("any with a GPU per rank: both groups, each rank chooses", func(t *testing.T) {
		rows := run(t, Local{Ranks: 2, Backend: "any", Env: base, GPUs: []string{"0", "1"}})
		for r, f := range rows {
			if f[1] != "2" || f[4] != strconv.Itoa(r) || f[5] != "0" || f[6] != "hostfile" {
				t.Errorf("rank %d: %q, want NCCL's variables, GPU %d and the ring's hostfile", r, f, r)
			}
			if w := detect(t, "any", f, true); w.Backend != "nccl" {
				t.Errorf("rank %d on a build with NCCL: %+v", r, w)
			}
		}
	})
	t.Run("any with fewer GPUs than ranks: the ring alone", func(t *testing.T) {
		for _, gpus := range [][]string{{"0"}, {}} {
			for r, f := range run(t, Local{Ranks: 2, Backend: "any", Env: base, GPUs: gpus}) {
				if want := []string{strconv.Itoa(r), "", "", "", "0,1,2,3,4,5", "unset", "hostfile"}; !slices.Equal(f, want) {
					t.Errorf("GPUs %q, rank %d: %q, want %q", gpus, r, f, want)
				}
			}
		}
	})
	t.Run("nccl with fewer GPUs than ranks is refused", func(t *testing.T) {
		err := Local{Ranks: 2, Backend: "nccl", Exe: sh, Args: []string{"-c", "exit 9"}, Env: append(slices.Clip(base), "CUDA_VISIBLE_DEVICES=3")}.Run(context.Background())
		if err == nil || err.Error() != "--launch 2 over NCCL needs a GPU for each rank (NCCL cannot put two ranks on one), and CUDA_VISIBLE_DEVICES=3 lists 1" {
			t.Errorf("Run = %v", err)
		}
	})
	t.Run("a backend --launch cannot start", func(t *testing.T) {
		if err := (Local{Ranks: 2, Backend: "mpi", Exe: sh}).Run(context.Background()); err == nil || !strings.Contains(err.Error(), `backend "mpi": want ring, nccl or any`) {
			t.Errorf("Run = %v", err)
		}
	})
}

// TestVisibleGPUs: CUDA_VISIBLE_DEVICES as CUDA reads it, else the driver's list of GPUs,
// else unknown.
func TestVisibleGPUs(t *testing.T) {
	driver := t.TempDir()
	for _, bus := range []string{"0000:18:00.0", "0000:2a:00.0"} {
		if err := os.Mkdir(filepath.Join(driver, bus), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	none := filepath.Join(driver, "absent")
	for _, tc := range []struct {
		env    []string
		dir    string
		want   []string
		source string
	}{
		{[]string{"CUDA_VISIBLE_DEVICES=2,3"}, none, []string{"2", "3"}, "CUDA_VISIBLE_DEVICES=2,3"},
		{[]string{"CUDA_VISIBLE_DEVICES=0", "CUDA_VISIBLE_DEVICES= 1 , 0 "}, none, []string{"1", "0"}, "CUDA_VISIBLE_DEVICES= 1 , 0 "},
		{[]string{"CUDA_VISIBLE_DEVICES=GPU-8a2f,MIG-77c1"}, driver, []string{"GPU-8a2f", "MIG-77c1"}, "CUDA_VISIBLE_DEVICES=GPU-8a2f,MIG-77c1"},
		{[]string{"CUDA_VISIBLE_DEVICES=0,-1,1"}, driver, []string{"0"}, "CUDA_VISIBLE_DEVICES=0,-1,1"}, // CUDA stops at an invalid entry
		{[]string{"CUDA_VISIBLE_DEVICES=-1"}, driver, []string{}, "CUDA_VISIBLE_DEVICES=-1"},
		{[]string{"CUDA_VISIBLE_DEVICES="}, driver, []string{}, "CUDA_VISIBLE_DEVICES="}, // set empty: no GPU
		{[]string{"PATH=/bin"}, driver, []string{"0", "1"}, "this machine (" + driver + ")"},
		{nil, none, nil, ""},
	} {
		got, source := visibleGPUs(tc.env, tc.dir)
		if !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) || source != tc.source {
			t.Errorf("visibleGPUs(%q, %s) = %#v, %q, want %#v, %q", tc.env, filepath.Base(tc.dir), got, source, tc.want, tc.source)
		}
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
