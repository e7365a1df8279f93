// Package runlock keeps two training runs out of one output directory. A run takes the
// directory's lock file before it writes anything there and holds it until it ends; a
// second run finds it held and refuses, naming the first run's pid and host.
//
// On Unix the lock is flock(2) on the file, which the kernel drops when its holder dies
// however it dies (SIGKILL, OOM kill, a crash): a lock file whose flock can be taken was
// left by a run that is gone, and is replaced (Acquire reports whose it was). The file's
// content — pid, host, start time — only names the holder. Elsewhere (Windows) the file is
// created exclusively and a leftover one counts as stale when it names this host and a pid
// that no longer runs.
package runlock
