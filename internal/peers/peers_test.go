package peers

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// ring connects n watches on localhost, as n ranks would.
func ring(t *testing.T, n int, timeout time.Duration) []*Watch {
	t.Helper()
	lns := make([]net.Listener, n)
	ports := make([]int, n)
	hosts := make([]string, n)
	for r := range n {
		ln, err := Listen("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		lns[r], ports[r], hosts[r] = ln, Port(ln), "127.0.0.1"
	}
	ws := make([]*Watch, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws[r], errs[r] = Connect(Options{Rank: r, Size: n, Hosts: hosts, Timeout: timeout, Interval: 50 * time.Millisecond}, lns[r], ports)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		for _, w := range ws {
			w.Close()
		}
	})
	return ws
}

// die ends a rank the way a killed process does: sockets closed, no goodbye.
func die(w *Watch) {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.shutdown()
}

// lostWithin waits for w to fire and returns its error.
func lostWithin(t *testing.T, w *Watch, d time.Duration) *LostError {
	t.Helper()
	select {
	case <-w.Lost():
	case <-time.After(d):
		t.Fatalf("rank %d: nothing fired within %s", w.opt.Rank, d)
	}
	var le *LostError
	if !errors.As(w.Err(), &le) {
		t.Fatalf("rank %d: Err() = %v, want a *LostError", w.opt.Rank, w.Err())
	}
	return le
}

func quietFor(t *testing.T, w *Watch, d time.Duration) {
	t.Helper()
	select {
	case <-w.Lost():
		t.Fatalf("rank %d fired: %v", w.opt.Rank, w.Err())
	case <-time.After(d):
	}
}

func TestHealthyRingStaysQuiet(t *testing.T) {
	t.Parallel()
	ws := ring(t, 3, time.Second)
	// Several timeouts pass: the pings keep every link alive.
	quietFor(t, ws[0], 2500*time.Millisecond)
	for _, w := range ws {
		if w.Err() != nil {
			t.Errorf("rank %d: %v", w.opt.Rank, w.Err())
		}
	}
}

func TestDeadRankIsNamedEverywhere(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ws := ring(t, n, 5*time.Second)
			start := time.Now()
			die(ws[1])
			for r, w := range ws {
				if r == 1 {
					continue
				}
				le := lostWithin(t, w, 3*time.Second)
				if le.Rank != 1 || !strings.Contains(le.Reason, "without a goodbye") {
					t.Errorf("rank %d: %v", r, le)
				}
				// The others hear it from a neighbour; a neighbour sees it directly, unless
				// (under load) the relayed news arrives first.
				direct := r == 0 || r == 2%n
				if !direct && le.Via < 0 {
					t.Errorf("rank %d: via %d, want a relay", r, le.Via)
				}
			}
			// A closed socket is noticed at once, not after the timeout.
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %s", d)
			}
			if got := ws[0].Err().Error(); !strings.HasPrefix(got, "rank 1 (127.0.0.1) closed its connection") {
				t.Errorf("message %q", got)
			}
		})
	}
}

func TestFailureTravelsRoundTheRing(t *testing.T) {
	t.Parallel()
	ws := ring(t, 4, 5*time.Second)
	ws[2].Fail(errors.New("save adapters.safetensors:\nno space left on device"))
	for _, r := range []int{0, 1, 3} {
		le := lostWithin(t, ws[r], 3*time.Second)
		if le.Rank != 2 || le.Reason != "failed: save adapters.safetensors: no space left on device" {
			t.Errorf("rank %d: %v", r, le)
		}
	}
	if le := ws[0].Err().(*LostError); le.Via != 1 && le.Via != 3 {
		t.Errorf("rank 0 heard it from rank %d", le.Via)
	} else if got := le.Error(); got != fmt.Sprintf("rank 2 (127.0.0.1) failed: save adapters.safetensors: no space left on device (reported by rank %d)", le.Via) {
		t.Errorf("message %q", got)
	}
	// A neighbour that hears it directly needs no "reported by" (under load the relayed
	// report can arrive first; then it names the relay).
	want := "rank 2 (127.0.0.1) failed: save adapters.safetensors: no space left on device"
	if le := ws[1].Err().(*LostError); le.Via >= 0 && le.Via != le.Rank {
		want += fmt.Sprintf(" (reported by rank %d)", le.Via)
	}
	if got := ws[1].Err().Error(); got != want {
		t.Errorf("rank 1's message %q, want %q", got, want)
	}
	// The failing rank itself does not fire on its own news.
	quietFor(t, ws[2], 200*time.Millisecond)
}

func TestGoodbyeIsNotAFailure(t *testing.T) {
	t.Parallel()
	ws := ring(t, 3, time.Second)
	ws[1].Close()
	quietFor(t, ws[0], 2500*time.Millisecond)
	quietFor(t, ws[2], 10*time.Millisecond)
}

// TestSilentRankTimesOut: a neighbour that connected and then says nothing (a stopped
// process, a pulled cable) is lost after the timeout.
func TestSilentRankTimesOut(t *testing.T) {
	t.Parallel()
	ln0, err := Listen("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln1, err := Listen("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer ln1.Close()
	ports := []int{Port(ln0), Port(ln1)}
	// Rank 1 is a fake: it accepts rank 0, says hello, and then nothing.
	go func() {
		c, err := ln1.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		d, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0]))
		if err != nil {
			return
		}
		defer d.Close()
		fmt.Fprintf(d, "%s\n", hello(1, 2))
		time.Sleep(5 * time.Second)
	}()
	w, err := Connect(Options{Rank: 0, Size: 2, Hosts: []string{"127.0.0.1", "127.0.0.1"}, Timeout: 400 * time.Millisecond}, ln0, ports)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	start := time.Now()
	le := lostWithin(t, w, 3*time.Second)
	if le.Rank != 1 || !strings.Contains(le.Reason, "sent nothing for 400ms") {
		t.Errorf("%v", le)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("fired after %s, before the timeout", d)
	}
}

// TestConnectIsBounded: a neighbour that never comes is an error within the timeout,
// and a stray client on the port is not mistaken for it.
func TestConnectIsBounded(t *testing.T) {
	t.Parallel()
	ln0, err := Listen("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln1, err := Listen("127.0.0.1") // rank 1's listener exists, but rank 1 never dials
	if err != nil {
		t.Fatal(err)
	}
	defer ln1.Close()
	go func() {
		c, err := net.Dial("tcp", ln0.Addr().String())
		if err == nil {
			fmt.Fprintln(c, "GET / HTTP/1.0")
			bufio.NewReader(c).ReadString('\n')
			c.Close()
		}
	}()
	start := time.Now()
	_, err = Connect(Options{Rank: 0, Size: 2, Hosts: []string{"127.0.0.1", "127.0.0.1"}, Timeout: 500 * time.Millisecond}, ln0, []int{Port(ln0), Port(ln1)})
	if err == nil || !strings.Contains(err.Error(), "heard nothing from rank 1 (127.0.0.1) within 500ms") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestGroupOfOne(t *testing.T) {
	t.Parallel()
	ln, err := Listen("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	w, err := Connect(Options{Rank: 0, Size: 1, Hosts: []string{"127.0.0.1"}, Timeout: time.Second}, ln, []int{Port(ln)})
	if err != nil {
		t.Fatal(err)
	}
	quietFor(t, w, 50*time.Millisecond)
	w.Fail(errors.New("x"))
	w.Close()
}
