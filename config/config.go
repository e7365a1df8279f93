package config

// Config is every setting of train, eval and export. The mapstructure tags are the
// YAML keys; `help` documents the flag.
type Config struct {
	Model   string `mapstructure:"model" help:"checkpoint directory (config.json, *.safetensors, tokenizer.json)"`
	Data    string `mapstructure:"data" help:"data directory with train/valid/test .jsonl or .parquet"`
	Backend string `mapstructure:"backend" help:"array engine: auto, go or mlx"`
	// ComputeDType and MemoryLimitGB matter most on a GPU (README: GPU).
	ComputeDType string `mapstructure:"compute_dtype" help:"dtype of the base's unquantized weights, quantization scales and activations: float32, or bfloat16 (mlx engine; the adapter, optimizer state and loss stay float32)"`
	// QuantizeOnLoad quantizes an unquantized base while loading it, as `convert --bits N`
	// would on disk (README: convert).
	QuantizeOnLoad int     `mapstructure:"quantize_on_load" help:"quantize an unquantized (bf16/f32) base while loading it: 0 (off), 4 or 8 bits, group size 64, exactly as convert --bits 4|8 writes it (QLoRA without a converted copy)"`
	MemoryLimitGB  float64 `mapstructure:"memory_limit_gb" help:"the mlx engine's allocator limit in GiB (0 = 70% of a GPU's memory, at most 100; MLX's own on a CPU)"`
	Seed           uint64  `mapstructure:"seed" help:"seed of every random draw (LoRA init, shuffling, noise)"`
	// Recipe sets the defaults of many keys at once (recipe.go); keys given anywhere win.
	Recipe string `mapstructure:"recipe" help:"defaults of a published recipe: optiq (mlx-optiq's DiffusionGemma LoRA recipe, the defaults) or nemo (NeMo AutoModel's diffusion_gemma_lora.yaml); keys you set win"`

	FineTuneType   string         `mapstructure:"fine_tune_type" help:"lora, or full (all unquantized weights train)"`
	NumLayers      int            `mapstructure:"num_layers" help:"adapt the last N layers (-1 = all)"`
	LoRAParameters LoRAParameters `mapstructure:"lora_parameters"`

	BatchSize             int          `mapstructure:"batch_size" help:"examples per step (rows may differ in length)"`
	Iters                 int          `mapstructure:"iters" help:"training steps (ignored when epochs > 0)"`
	Epochs                int          `mapstructure:"epochs" help:"train for this many passes over the train split instead of iters"`
	LearningRate          float64      `mapstructure:"learning_rate" help:"learning rate (with an lr_schedule, its first argument is the initial rate instead)"`
	Optimizer             string       `mapstructure:"optimizer" help:"adamw, adam or sgd"`
	OptimizerConfig       OptimizerCfg `mapstructure:"optimizer_config"`
	LRSchedule            LRSchedule   `mapstructure:"lr_schedule"`
	GradAccumulationSteps int          `mapstructure:"grad_accumulation_steps" help:"micro-batches averaged per optimizer step"`
	LossNormalization     string       `mapstructure:"loss_normalization" help:"micro_batch (each micro-batch's denoising loss over its own scored positions, micro-batches averaged; mlx-lm) or step (over the scored positions of the whole step, every micro-batch and rank; NeMo AutoModel)"`
	GradClip              float64      `mapstructure:"grad_clip" help:"clip the global gradient norm to this (0 = off)"`
	GradCheckpoint        bool         `mapstructure:"grad_checkpoint" help:"recompute each layer in the backward pass instead of keeping its activations (less memory, ~1/3 more compute; lora only)"`
	Compile               bool         `mapstructure:"compile" help:"compile each example's loss and gradient (mlx engine: mlx.compile, traced once per prompt and canvas length; the reference objective without LoRA dropout; other steps run uncompiled)"`
	EarlyStoppingPatience int          `mapstructure:"early_stopping_patience" help:"stop after this many evaluations without a better val loss (0 = off)"`
	Shuffle               bool         `mapstructure:"shuffle" help:"shuffle the train split each epoch (seeded)"`

	ValBatches     int    `mapstructure:"val_batches" help:"validation batches per evaluation (-1 = whole valid split)"`
	StepsPerReport int    `mapstructure:"steps_per_report" help:"steps between progress reports"`
	StepsPerEval   int    `mapstructure:"steps_per_eval" help:"steps between validations (0 = only at start and end)"`
	SaveEvery      int    `mapstructure:"save_every" help:"steps between numbered adapter checkpoints"`
	AdapterPath    string `mapstructure:"adapter_path" help:"output directory of the adapter and training state"`
	Resume         bool   `mapstructure:"resume" help:"continue from the training state in adapter_path"`
	Overwrite      bool   `mapstructure:"overwrite" help:"without resume: start over a run already in adapter_path, deleting its checkpoints, state and metrics (else train refuses)"`

	// mlx-lm's mlx_lm.lora keys with a meaning of their own here (mlxlm.go).
	Train             bool   `mapstructure:"train" help:"train (false: only evaluate the test split, which needs test: true; mlx-lm)"`
	Test              bool   `mapstructure:"test" help:"after training, evaluate the test split and print test loss and ppl = exp(loss) (mlx-lm)"`
	TestBatches       int    `mapstructure:"test_batches" help:"test batches (of batch_size examples) to evaluate (-1 = the whole test split; mlx-lm)"`
	ResumeAdapterFile string `mapstructure:"resume_adapter_file" help:"start from these adapter weights (a .safetensors file or an adapter directory) with a fresh optimizer (mlx-lm)"`
	MaxSeqLength      int    `mapstructure:"max_seq_length" help:"cap on prompt + canvas tokens: max_prompt becomes at most max_seq_length - max_canvas (0 = no cap; mlx-lm)"`
	MaskPrompt        bool   `mapstructure:"mask_prompt" help:"score only the completion: always so for the denoising objective (false is an error; mlx-lm)"`

	Distributed        string `mapstructure:"distributed" help:"join a data-parallel group: ring, nccl, mpi or any (MLX's backends; any takes NCCL first on a CUDA build, as MLX does); empty: only when started as a rank (MLX_RANK + MLX_HOSTFILE, MLX_RANK + MLX_WORLD_SIZE + NCCL_HOST_IP + NCCL_PORT, mpirun)"`
	DistributedTimeout int    `mapstructure:"distributed_timeout" help:"seconds without word from a peer rank before the run stops (twice this for the group to form)"`

	MaxCanvas     int     `mapstructure:"max_canvas" help:"truncate completions to this many tokens (the canvas length)"`
	MaxPrompt     int     `mapstructure:"max_prompt" help:"keep only the last N prompt tokens (0 = no limit)"`
	EOSFill       bool    `mapstructure:"eos_fill" help:"append <turn|> and fill the canvas with EOS so the model learns where answers end"`
	LossPositions string  `mapstructure:"loss_positions" help:"corrupted (reference) or all"`
	Weighting     string  `mapstructure:"weighting" help:"none or inv_t"`
	TMin          float64 `mapstructure:"t_min" help:"lowest noise level (-1 = checkpoint's generation config)"`
	TMax          float64 `mapstructure:"t_max" help:"highest noise level (-1 = checkpoint's generation config)"`
	// The NeMo AutoModel options (README: objective table); `objective: nemo` sets them
	// and the keys above as NeMo does, unless they are given.
	Objective         string  `mapstructure:"objective" help:"loss preset: reference (mlx-optiq) or nemo (NeMo AutoModel; sets t_min, t_max, loss_positions, eos_fill, self_conditioning, encoder_loss_weight and long_targets unless they are given)"`
	SelfConditioning  float64 `mapstructure:"self_conditioning" help:"probability per example of the two-pass self-conditioned step (0 = off)"`
	EncoderLossWeight float64 `mapstructure:"encoder_loss_weight" help:"weight of the encoder's causal next-token loss over the clean prompt + target (0 = off)"`
	LongTargets       string  `mapstructure:"long_targets" help:"truncate (to max_canvas) or random_block (one random max_canvas block per example, the earlier blocks in the encoder's context)"`
	// SelfConditioningDraw: NeMo draws its coin per (step, micro-batch) of each rank, so with
	// its published local batch of 1 every example of a step's micro-batch shares it.
	SelfConditioningDraw string `mapstructure:"self_conditioning_draw" help:"example (a self_conditioning coin per example) or step (one coin per micro-batch of a step, shared by its examples on every rank; NeMo AutoModel)"`
	// ChatTemplate picks how a row becomes prompt and target ids (README: Data).
	ChatTemplate string `mapstructure:"chat_template" help:"dgtune (prompt ends with the empty thought channel; target = the completion) or nemo (NeMo AutoModel's: prompt ends at <|turn>model\\n, target = the trimmed content + <turn|>\\n, max_seq_length cuts prompt + target at the end)"`

	PromptFeature     string `mapstructure:"prompt_feature" help:"name of the prompt field"`
	CompletionFeature string `mapstructure:"completion_feature" help:"name of the completion field"`
	TextFeature       string `mapstructure:"text_feature" help:"name of the text field"`
	ChatFeature       string `mapstructure:"chat_feature" help:"name of the messages field"`
	SkipBadRows       bool   `mapstructure:"skip_bad_rows" help:"skip and count malformed rows instead of failing"`

	Eval Eval `mapstructure:"eval"`

	// Notes are one-line remarks from loading: mlx-lm keys accepted without effect, and
	// how max_seq_length was mapped. Not a key (no mapstructure tag).
	Notes []string
	// Presets names, for each key whose value a preset set (no file, variable or flag gave
	// it), the preset: "recipe nemo", "objective nemo". Not a key.
	Presets map[string]string
}

// LoRAParameters are the adapter's shape, as in mlx-lm.
type LoRAParameters struct {
	Rank    int      `mapstructure:"rank" help:"LoRA rank"`
	Scale   float64  `mapstructure:"scale" help:"LoRA scale (y += scale·x·A·B; PEFT alpha = scale·rank)"`
	Dropout float64  `mapstructure:"dropout" help:"dropout on the LoRA input"`
	Keys    []string `mapstructure:"keys" help:"linears to adapt, relative to a decoder layer"`
	Encoder string   `mapstructure:"encoder" help:"shared (one set of weights for the encoder and decoder passes, optiq) or separate (the encoder pass has its own, as PEFT on transformers)"`
	Init    string   `mapstructure:"init" help:"how A is drawn (B = 0): kaiming_uniform (U(±1/√in), PEFT's and mlx-lm's default), xavier_normal (N(0, 2/(in+rank)), NeMo AutoModel's) or gaussian (N(0, 1/rank²), PEFT's init_lora_weights gaussian)"`
}

// OptimizerCfg holds optimizer hyper-parameters (MLX names and defaults).
type OptimizerCfg struct {
	Betas          []float64 `mapstructure:"betas" help:"Adam betas"`
	Eps            float64   `mapstructure:"eps" help:"Adam epsilon"`
	WeightDecay    float64   `mapstructure:"weight_decay" help:"decoupled weight decay (AdamW, SGD)"`
	BiasCorrection bool      `mapstructure:"bias_correction" help:"Adam bias correction (MLX default off)"`
	Momentum       float64   `mapstructure:"momentum" help:"SGD momentum"`
	Nesterov       bool      `mapstructure:"nesterov" help:"SGD Nesterov momentum"`
}

// LRSchedule is mlx-lm's lr_schedule: a named MLX schedule, its arguments and a
// linear warmup.
type LRSchedule struct {
	Name       string    `mapstructure:"name" help:"constant, cosine_decay, linear_schedule, exponential_decay or step_decay"`
	Arguments  []float64 `mapstructure:"arguments" help:"the mlx.optimizers schedule's arguments, initial rate first (it replaces learning_rate): cosine_decay init,decay_steps[,end]; linear_schedule init,end,steps; exponential_decay init,decay_rate; step_decay init,decay_rate,step_size; constant [value]"`
	Warmup     int       `mapstructure:"warmup" help:"linear warmup steps"`
	WarmupInit float64   `mapstructure:"warmup_init" help:"learning rate at the start of the warmup"`
}

// Eval configures `eval`.
type Eval struct {
	Split       string    `mapstructure:"split" help:"data split to evaluate"`
	NoiseLevels []float64 `mapstructure:"noise_levels" help:"fixed noise levels t for loss and accuracy"`
	MaxExamples int       `mapstructure:"max_examples" help:"evaluate at most this many examples (-1 = all)"`
	Generate    bool      `mapstructure:"generate" help:"also score generations with the denoising sampler"`
	MaxTokens   int       `mapstructure:"max_tokens" help:"generation limit (0 = the reference length when eos_fill is off, else max_canvas)"`
	Steps       int       `mapstructure:"steps" help:"max denoising steps per block (0 = checkpoint's)"`
	Sampler     string    `mapstructure:"sampler" help:"confidence or entropy"`
	Temperature float64   `mapstructure:"temperature" help:"sampling temperature (0 = greedy)"`
	SelfCond    bool      `mapstructure:"self_conditioning" help:"the sampler conditions each pass on the previous pass's distribution (false = every pass as the first, an ablation)"`
	TwoPass     bool      `mapstructure:"two_pass" help:"also score loss and accuracy with the two-pass step (a second decoder pass conditioned on the first's logits)"`
	Samples     int       `mapstructure:"samples" help:"sample generations to print"`
}

// Defaults returns optiq's recipe (rank 8, scale 8, lr 1e-4, AdamW without bias
// correction, t from the checkpoint) with mlx-lm's trainer defaults elsewhere.
func Defaults() Config {
	return Config{
		Backend:        "auto",
		Recipe:         "optiq",
		ComputeDType:   "float32",
		FineTuneType:   "lora",
		NumLayers:      -1,
		LoRAParameters: LoRAParameters{Rank: 8, Scale: 8, Dropout: 0, Encoder: "shared", Init: "kaiming_uniform", Keys: []string{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}},
		BatchSize:      1,
		Iters:          200,
		LearningRate:   1e-4,
		Optimizer:      "adamw",
		OptimizerConfig: OptimizerCfg{
			Betas: []float64{0.9, 0.999}, Eps: 1e-8, WeightDecay: 0.01, Momentum: 0,
		},
		LRSchedule:            LRSchedule{Name: "constant"},
		GradAccumulationSteps: 1,
		LossNormalization:     "micro_batch",
		Shuffle:               true,
		ValBatches:            -1,
		StepsPerReport:        10,
		StepsPerEval:          100,
		SaveEvery:             100,
		AdapterPath:           "checkpoints/adapters",
		Train:                 true,
		TestBatches:           500,
		MaskPrompt:            true,
		DistributedTimeout:    30,
		MaxCanvas:             256,
		LossPositions:         "corrupted",
		Weighting:             "none",
		TMin:                  -1,
		TMax:                  -1,
		Objective:             "reference",
		LongTargets:           "truncate",
		SelfConditioningDraw:  "example",
		ChatTemplate:          "dgtune",
		PromptFeature:         "prompt",
		CompletionFeature:     "completion",
		TextFeature:           "text",
		ChatFeature:           "messages",
		Eval: Eval{
			Split: "test", NoiseLevels: []float64{0.25, 0.5, 0.75}, MaxExamples: -1, Generate: true,
			Sampler: "confidence", Samples: 3, SelfCond: true,
		},
	}
}
