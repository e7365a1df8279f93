package generate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dgtune/dgtune/lora"
)

// Trained is what an adapter's adapter_config.json says about its training, as far as
// generation cares. dgtune's train records its resolved config under "training"; adapters
// from elsewhere (PEFT, mlx-lm) have none of it.
type Trained struct {
	// BaseModel is the base the adapter names (base_model, or PEFT's
	// base_model_name_or_path), "" when none.
	BaseModel string
	// Recorded is true when the file holds dgtune's training settings.
	Recorded bool
	// MaxCanvas is the canvas (completion) length the adapter was trained on.
	MaxCanvas int
	// EOSFill: the canvases ended in <turn|> and EOS, so the adapter learned where an answer
	// ends. Without it the reference objective never shows an end.
	EOSFill bool
}

// ReadTrained reads dir/adapter_config.json. A directory without one (an optiq adapter) is
// a zero Trained; a file that is not JSON is an error naming it.
func ReadTrained(dir string) (Trained, error) {
	path := filepath.Join(dir, lora.ConfigFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Trained{}, nil
	}
	if err != nil {
		return Trained{}, fmt.Errorf("read %s: %w", path, err)
	}
	var ac struct {
		BaseModel string `json:"base_model"`
		PEFTBase  string `json:"base_model_name_or_path"`
		Training  *struct {
			MaxCanvas *int  `json:"max_canvas"`
			EOSFill   *bool `json:"eos_fill"`
		} `json:"training"`
	}
	if err := json.Unmarshal(b, &ac); err != nil {
		return Trained{}, fmt.Errorf("%s: %w", path, err)
	}
	t := Trained{BaseModel: ac.BaseModel}
	if t.BaseModel == "" {
		t.BaseModel = ac.PEFTBase
	}
	if tr := ac.Training; tr != nil && tr.MaxCanvas != nil && tr.EOSFill != nil {
		if *tr.MaxCanvas <= 0 {
			return Trained{}, fmt.Errorf("%s: training.max_canvas %d: want a positive number", path, *tr.MaxCanvas)
		}
		t.Recorded, t.MaxCanvas, t.EOSFill = true, *tr.MaxCanvas, *tr.EOSFill
	}
	return t, nil
}
