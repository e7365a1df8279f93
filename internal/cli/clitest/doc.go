// Package clitest is what the commands' tests share to run a built command as a child
// process: building it, and signalling it once it is busy to check how it stops.
package clitest
