// Package cputest is what the kernel packages' tests share about CPU features: a test of
// an AVX-512 path skips on a CPU without AVX-512F (this development machine and CI have
// none), unless the environment asks for those paths — RequireEnv=1, set where the tests
// are run on purpose on a machine that has them (bench/avx512_tests.sh) — in which case a
// missing feature is a failure, so that a run that checked nothing cannot pass.
//
// The variable is not named DGTUNE_*: the commands reject any DGTUNE_* variable that is
// not a setting, and this one may stay exported in a shell that then runs them.
package cputest
