package peers

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// protocol opens every connection, so that a stray client (or a rank of another run
// on the same port) is told apart from the neighbour.
const protocol = "dgtune-peers/1"

// Options place one rank in the ring.
type Options struct {
	Rank, Size int
	// Hosts are the host (IP address or name) of each rank, in rank order: the hosts of
	// the ring's own addresses, so the side channel takes the same links.
	Hosts []string
	// Timeout is the silence after which a neighbour is lost, and the bound on Connect.
	Timeout time.Duration
	// Interval is the time between pings; 0 means Timeout/10, at most one second.
	Interval time.Duration
}

func (o Options) interval() time.Duration {
	if o.Interval > 0 {
		return o.Interval
	}
	return min(time.Second, o.Timeout/10)
}

func (o Options) host(rank int) string {
	if rank >= 0 && rank < len(o.Hosts) {
		return o.Hosts[rank]
	}
	return "?"
}

// LostError names the rank a run lost and why.
type LostError struct {
	Rank   int    // the rank that was lost or failed
	Host   string // its host
	Reason string // "its connection closed ...", "sent nothing for ...", "failed: ..."
	Via    int    // the neighbour that passed the news on, or -1 when seen directly
}

func (e *LostError) Error() string {
	s := fmt.Sprintf("rank %d (%s) %s", e.Rank, e.Host, e.Reason)
	if e.Via >= 0 && e.Via != e.Rank {
		s += fmt.Sprintf(" (reported by rank %d)", e.Via)
	}
	return s
}

// Watch is one rank's view of its neighbours.
type Watch struct {
	opt   Options
	ln    net.Listener
	links []*link

	mu      sync.Mutex
	err     *LostError
	lost    chan struct{}
	closing bool
	stop    chan struct{} // ends the pingers
}

// link is the connection to one neighbour.
type link struct {
	peer int
	c    net.Conn
	wmu  sync.Mutex
	bye  bool // the peer said goodbye; guarded by Watch.mu
}

func (l *link) send(line string, timeout time.Duration) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.c.SetWriteDeadline(time.Now().Add(timeout))
	_, err := l.c.Write([]byte(line + "\n"))
	return err
}

// Listen opens this rank's side-channel listener on host, on a port the system picks;
// the ranks exchange their ports before Connect.
func Listen(host string) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("peers: listen on %s: %w", host, err)
	}
	return ln, nil
}

// Port is the port of a listener from Listen.
func Port(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }

// Connect dials the right neighbour at Hosts[right]:ports[right] and accepts the left
// one on ln, both within Timeout, then starts watching. A group of one has nothing to
// watch: its Lost never fires. The Watch owns ln.
func Connect(opt Options, ln net.Listener, ports []int) (*Watch, error) {
	if opt.Timeout <= 0 {
		return nil, errors.New("peers: timeout must be positive")
	}
	w := &Watch{opt: opt, ln: ln, lost: make(chan struct{}), stop: make(chan struct{})}
	if opt.Size <= 1 {
		ln.Close()
		return w, nil
	}
	if len(ports) != opt.Size || len(opt.Hosts) != opt.Size {
		ln.Close()
		return nil, fmt.Errorf("peers: %d ports and %d hosts for %d ranks", len(ports), len(opt.Hosts), opt.Size)
	}
	right := (opt.Rank + 1) % opt.Size
	left := (opt.Rank + opt.Size - 1) % opt.Size
	deadline := time.Now().Add(opt.Timeout)
	type result struct {
		c   net.Conn
		err error
	}
	accepted := make(chan result, 1)
	go func() {
		c, err := w.accept(left, deadline)
		accepted <- result{c, err}
	}()
	rc, derr := w.dial(right, ports[right], deadline)
	a := <-accepted
	if derr != nil || a.err != nil {
		for _, c := range []net.Conn{rc, a.c} {
			if c != nil {
				c.Close()
			}
		}
		ln.Close()
		return nil, errors.Join(derr, a.err)
	}
	w.links = []*link{{peer: right, c: rc}, {peer: left, c: a.c}}
	for _, l := range w.links {
		go w.read(l)
		go w.ping(l)
	}
	return w, nil
}

func hello(rank, size int) string { return fmt.Sprintf("%s %d %d", protocol, rank, size) }

func (w *Watch) dial(peer, port int, deadline time.Time) (net.Conn, error) {
	addr := net.JoinHostPort(w.opt.host(peer), strconv.Itoa(port))
	var last error
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
		if err == nil {
			l := &link{c: c}
			if err = l.send(hello(w.opt.Rank, w.opt.Size), time.Until(deadline)); err == nil {
				return c, nil
			}
			c.Close()
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("peers: rank %d could not reach rank %d at %s within %s: %v", w.opt.Rank, peer, addr, w.opt.Timeout, last)
}

// accept waits for the left neighbour's hello, dropping any other connection.
func (w *Watch) accept(peer int, deadline time.Time) (net.Conn, error) {
	if tl, ok := w.ln.(*net.TCPListener); ok {
		tl.SetDeadline(deadline)
	}
	want := hello(peer, w.opt.Size)
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return nil, fmt.Errorf("peers: rank %d heard nothing from rank %d (%s) within %s: %v", w.opt.Rank, peer, w.opt.host(peer), w.opt.Timeout, err)
		}
		c.SetReadDeadline(deadline)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil && strings.TrimSpace(line) == want {
			c.SetReadDeadline(time.Time{})
			return c, nil
		}
		c.Close()
	}
}

// read follows one neighbour until it is lost, says goodbye and closes, or this
// rank closes.
func (w *Watch) read(l *link) {
	r := bufio.NewReader(l.c)
	for {
		w.mu.Lock()
		quiet := l.bye || w.closing
		w.mu.Unlock()
		if quiet {
			l.c.SetReadDeadline(time.Time{})
		} else {
			l.c.SetReadDeadline(time.Now().Add(w.opt.Timeout))
		}
		line, err := r.ReadString('\n')
		if err != nil {
			w.mu.Lock()
			quiet = l.bye || w.closing
			w.mu.Unlock()
			if quiet {
				return
			}
			var ne net.Error
			reason := "closed its connection without a goodbye (the process died or was killed)"
			if errors.As(err, &ne) && ne.Timeout() {
				reason = fmt.Sprintf("sent nothing for %s (its machine is unreachable, or the process is stopped or stuck)", w.opt.Timeout)
			}
			w.fire(&LostError{Rank: l.peer, Host: w.opt.host(l.peer), Reason: reason, Via: -1}, l)
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "ping":
		case line == "bye":
			w.mu.Lock()
			l.bye = true
			w.mu.Unlock()
		case strings.HasPrefix(line, "abort "):
			f := strings.SplitN(line, " ", 3)
			rank, err := strconv.Atoi(f[1])
			if err != nil || len(f) < 3 {
				continue
			}
			if rank == w.opt.Rank {
				continue // our own news, back around the ring
			}
			w.fire(&LostError{Rank: rank, Host: w.opt.host(rank), Reason: f[2], Via: l.peer}, l)
		}
	}
}

func (w *Watch) ping(l *link) {
	t := time.NewTicker(w.opt.interval())
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			// A failed write is the reader's to report: the peer's side closes too.
			l.send("ping", w.opt.Timeout)
		}
	}
}

// fire records the first loss and passes it on to the neighbours other than from.
func (w *Watch) fire(e *LostError, from *link) {
	w.mu.Lock()
	if w.err != nil || w.closing {
		w.mu.Unlock()
		return
	}
	w.err = e
	w.mu.Unlock()
	// Pass the news on before announcing it here: the caller may end the process as
	// soon as Lost fires.
	w.broadcast(fmt.Sprintf("abort %d %s", e.Rank, oneLine(e.Reason)), from)
	close(w.lost)
}

func (w *Watch) broadcast(line string, except *link) {
	var wg sync.WaitGroup
	for _, l := range w.links {
		if l == except {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.send(line, 2*time.Second)
		}()
	}
	wg.Wait()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Lost is closed when a neighbour is lost or a rank reported a failure.
func (w *Watch) Lost() <-chan struct{} { return w.lost }

// Err is the loss behind Lost, or nil.
func (w *Watch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return nil
	}
	return w.err
}

// Fail tells the other ranks that this one stops with err, so that they stop too and
// say why. It is a no-op once the Watch has fired (the news is already travelling)
// and returns when the messages are sent, or after two seconds.
func (w *Watch) Fail(err error) {
	w.mu.Lock()
	if w.err != nil || w.closing {
		w.mu.Unlock()
		return
	}
	w.closing = true
	w.mu.Unlock()
	w.broadcast(fmt.Sprintf("abort %d failed: %s", w.opt.Rank, oneLine(err.Error())), nil)
	w.shutdown()
}

// Close says goodbye to the neighbours, so that this rank's exit is not a failure to
// them, and closes the connections.
func (w *Watch) Close() {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return
	}
	w.closing = true
	w.mu.Unlock()
	w.broadcast("bye", nil)
	w.shutdown()
}

func (w *Watch) shutdown() {
	close(w.stop)
	for _, l := range w.links {
		l.c.Close()
	}
	w.ln.Close()
}
