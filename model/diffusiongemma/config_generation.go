// The generation config (§1.5, §4): the sampler's temperature schedule, sampler and stop
// rule with their defaults, and the EOS ids generation stops on.

package diffusiongemma

import (
	"encoding/json"
	"fmt"
	"slices"
)

// GenerationConfig drives the denoising sampler (§1.5, §4).
type GenerationConfig struct {
	MaxDenoisingSteps int     `json:"max_denoising_steps"`
	MaxNewTokens      int     `json:"max_new_tokens"`
	TMin              float64 `json:"t_min"`
	TMax              float64 `json:"t_max"`
	// LinearTemperatureScheduleConfig, when present, overrides t_min/t_max (mlx-vlm accepts
	// the schedule in this form as well).
	LinearTemperatureScheduleConfig *TemperatureSchedule `json:"linear_temperature_schedule_config,omitempty"`
	SamplerConfig                   *SamplerConfig       `json:"sampler_config,omitempty"`
	// ConfidenceThreshold and StabilityThreshold switch the stable-and-confident stop rule on
	// when either is present (§4.6); nil means absent.
	ConfidenceThreshold *float64 `json:"confidence_threshold,omitempty"`
	StabilityThreshold  *int     `json:"stability_threshold,omitempty"`
	// DiffusionStoppingConfig, when present, takes precedence over the two fields above.
	DiffusionStoppingConfig *StopRule `json:"diffusion_stopping_config,omitempty"`
	EOSTokenID              TokenIDs  `json:"eos_token_id,omitempty"`
	PadTokenID              int       `json:"pad_token_id"`
}

// TemperatureSchedule is the linear logit-temperature schedule t_min → t_max.
type TemperatureSchedule struct {
	TMin float64 `json:"t_min"`
	TMax float64 `json:"t_max"`
}

// SamplerConfig is generation_config.sampler_config.
type SamplerConfig struct {
	ClsName      string  `json:"_cls_name"`
	EntropyBound float64 `json:"entropy_bound"`
}

// StopRule is the stable-and-confident early stop of §4.6: stop a block once the argmax canvas
// has been identical for StabilityThreshold steps and the mean token entropy is below
// ConfidenceThreshold.
type StopRule struct {
	ConfidenceThreshold float64 `json:"confidence_threshold"`
	StabilityThreshold  int     `json:"stability_threshold"`
}

// §1.5 defaults.
const (
	defaultMaxDenoisingSteps   = 48
	defaultMaxNewTokens        = 256
	defaultTMin                = 0.4
	defaultTMax                = 0.8
	defaultEntropyBound        = 0.1
	defaultConfidenceThreshold = 0.005
	defaultStabilityThreshold  = 1
)

// UnmarshalJSON fills absent keys with the §1.5 defaults (mlx-vlm reads each key with a default).
func (t *TemperatureSchedule) UnmarshalJSON(b []byte) error {
	type temperatureSchedule TemperatureSchedule
	p := temperatureSchedule{TMin: defaultTMin, TMax: defaultTMax}
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("linear_temperature_schedule_config: %w", err)
	}
	*t = TemperatureSchedule(p)
	return nil
}

// UnmarshalJSON fills absent keys with the defaults (_cls_name defaults to the entropy-bound
// sampler, as in mlx-vlm).
func (s *SamplerConfig) UnmarshalJSON(b []byte) error {
	type samplerConfig SamplerConfig
	p := samplerConfig{ClsName: EntropyBoundSamplerCls, EntropyBound: defaultEntropyBound}
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("sampler_config: %w", err)
	}
	*s = SamplerConfig(p)
	return nil
}

// UnmarshalJSON fills absent keys with the §1.5 defaults.
func (s *StopRule) UnmarshalJSON(b []byte) error {
	type stopRule StopRule
	p := stopRule{ConfidenceThreshold: defaultConfidenceThreshold, StabilityThreshold: defaultStabilityThreshold}
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("diffusion_stopping_config: %w", err)
	}
	*s = StopRule(p)
	return nil
}

// DefaultGenerationConfig returns the §1.5 defaults without the stop rule and without a
// sampler_config: what a checkpoint that ships no generation config gets.
func DefaultGenerationConfig() GenerationConfig {
	return GenerationConfig{
		MaxDenoisingSteps: defaultMaxDenoisingSteps,
		MaxNewTokens:      defaultMaxNewTokens,
		TMin:              defaultTMin,
		TMax:              defaultTMax,
	}
}

// UnmarshalJSON decodes over DefaultGenerationConfig, so absent keys keep their defaults.
func (g *GenerationConfig) UnmarshalJSON(b []byte) error {
	type generationConfig GenerationConfig
	p := generationConfig(DefaultGenerationConfig())
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*g = GenerationConfig(p)
	return nil
}

// TemperatureRange returns the schedule's (t_min, t_max).
func (g *GenerationConfig) TemperatureRange() (tMin, tMax float64) {
	if s := g.LinearTemperatureScheduleConfig; s != nil {
		return s.TMin, s.TMax
	}
	return g.TMin, g.TMax
}

// Stop returns the stable-and-confident stop rule and whether it is on. It is on only if the
// generation config provided it: diffusion_stopping_config, or either threshold key (the other
// then takes its default).
func (g *GenerationConfig) Stop() (StopRule, bool) {
	if g.DiffusionStoppingConfig != nil {
		return *g.DiffusionStoppingConfig, true
	}
	if g.ConfidenceThreshold == nil && g.StabilityThreshold == nil {
		return StopRule{}, false
	}
	r := StopRule{ConfidenceThreshold: defaultConfidenceThreshold, StabilityThreshold: defaultStabilityThreshold}
	if g.ConfidenceThreshold != nil {
		r.ConfidenceThreshold = *g.ConfidenceThreshold
	}
	if g.StabilityThreshold != nil {
		r.StabilityThreshold = *g.StabilityThreshold
	}
	return r, true
}

// EntropyBound returns sampler_config.entropy_bound (0.1 when there is no sampler_config).
func (g *GenerationConfig) EntropyBound() float64 {
	if g.SamplerConfig == nil {
		return defaultEntropyBound
	}
	return g.SamplerConfig.EntropyBound
}

// EOSSet returns the sorted union of every configured EOS id: the top-level eos_token_id, the
// text config's, and the generation config's (§4.6).
func (c *Config) EOSSet() []int {
	var ids []int
	ids = append(ids, c.EOSTokenID...)
	ids = append(ids, c.TextConfig.EOSTokenID...)
	if c.GenerationConfig != nil {
		ids = append(ids, c.GenerationConfig.EOSTokenID...)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}
