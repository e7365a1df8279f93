// Package peers keeps the ranks of a distributed run aware of each other over a side
// channel of their own, next to MLX's ring.
//
// MLX's ring notices a peer only inside a collective, and only when its socket closes:
// a rank whose machine drops off the network, or whose process is stopped, leaves the
// others spinning in all_sum forever, and a rank that fails outside a collective (a
// full disk, a bad file) ends with an error the others never see. So each rank also
// holds one TCP connection to each ring neighbour (it dials the right one, rank+1, and
// accepts the left one, rank−1, at the addresses of the ring's hostfile) and, on it:
//
//   - sends "ping" every Interval; a neighbour silent for Timeout is lost;
//   - sends "bye" before a clean exit, so that its closing socket is not a failure;
//   - sends "abort <rank> <reason>" when it fails or learns of a failure, which every
//     rank passes on around the ring, so that all of them stop naming the rank that
//     was lost first, not just their neighbour.
//
// A Watch only reports (Lost, Err); what to do about it (stop the process, which may
// be blocked inside MLX) is the caller's decision.
package peers
