package train

// Purposes of derived seeds: every random stream of a run derives its keys from the run's
// seed with session.DeriveSeed(seed, purpose, ...), each with a purpose of its own.
const (
	seedLoRAInit uint64 = iota + 1
	seedShuffle
	seedTrainNoise
	seedValNoise
	seedDropout
	seedTrainChoice // the objective's per-example choices: block of a long target, self-conditioning coin
	seedValChoice
	seedTrainCoin // self_conditioning_draw step: one coin per (step, micro-batch)
)

// seedTestNoise is the purpose of the test split's fixed corruptions (test: true, train:
// false), apart from the training purposes.
const seedTestNoise uint64 = 1001
