// The MLX quantization map (§1.6) and the bit widths and group sizes the engines support.

package diffusiongemma

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Quantization is the MLX quantization map (§1.6): a default for every quantized module plus
// per-module overrides keyed by module path (the tensor name without ".weight").
type Quantization struct {
	GroupSize int
	Bits      int
	Mode      string
	Modules   map[string]ModuleQuantization
}

// ModuleQuantization overrides the default for one module. Quantized false is the JSON value
// `false` (the module is stored unquantized); zero GroupSize/Bits/empty Mode inherit the default.
type ModuleQuantization struct {
	Quantized bool
	GroupSize int
	Bits      int
	Mode      string
}

// For resolves a module's quantization. modulePath is the tensor name without ".weight" (a
// trailing ".weight" is tolerated). The answer is only meaningful for quantizable modules
// (linears, embeddings, experts): MLX never quantizes norms, so the map never names them.
func (q Quantization) For(modulePath string) (bits, groupSize int, quantized bool) {
	modulePath = strings.TrimSuffix(modulePath, ".weight")
	bits, groupSize, quantized = q.Bits, q.GroupSize, q.Bits > 0
	m, ok := q.Modules[modulePath]
	if !ok {
		return bits, groupSize, quantized
	}
	if !m.Quantized {
		return 0, 0, false
	}
	if m.Bits > 0 {
		bits = m.Bits
	}
	if m.GroupSize > 0 {
		groupSize = m.GroupSize
	}
	return bits, groupSize, bits > 0
}

// mode resolves a module's quantization mode.
func (q Quantization) mode(modulePath string) string {
	if m, ok := q.Modules[modulePath]; ok && m.Mode != "" {
		return m.Mode
	}
	return q.Mode
}

type quantParams struct {
	GroupSize int    `json:"group_size,omitempty"`
	Bits      int    `json:"bits,omitempty"`
	Mode      string `json:"mode,omitempty"`
}

// UnmarshalJSON reads the flat MLX map: group_size/bits/mode at the top level, and every other
// key whose value is an object or a boolean as a module override. Keys with other values are
// metadata and ignored.
func (q *Quantization) UnmarshalJSON(b []byte) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return fmt.Errorf("quantization: want an object: %w", err)
	}
	var out Quantization
	var top quantParams
	if err := json.Unmarshal(b, &top); err != nil {
		return fmt.Errorf("quantization: %w", err)
	}
	out.GroupSize, out.Bits, out.Mode = top.GroupSize, top.Bits, top.Mode
	if out.Mode == "" {
		out.Mode = QuantModeAffine
	}
	for k, raw := range keys {
		if k == "group_size" || k == "bits" || k == "mode" {
			continue
		}
		raw = bytes.TrimSpace(raw)
		var m ModuleQuantization
		switch {
		case bytes.Equal(raw, []byte("false")):
			m = ModuleQuantization{Quantized: false}
		case bytes.Equal(raw, []byte("true")):
			m = ModuleQuantization{Quantized: true}
		case len(raw) > 0 && raw[0] == '{':
			var p quantParams
			if err := json.Unmarshal(raw, &p); err != nil {
				return fmt.Errorf("quantization.%s: %w", k, err)
			}
			m = ModuleQuantization{Quantized: true, GroupSize: p.GroupSize, Bits: p.Bits, Mode: p.Mode}
		default:
			continue
		}
		if out.Modules == nil {
			out.Modules = map[string]ModuleQuantization{}
		}
		out.Modules[k] = m
	}
	*q = out
	return nil
}

// MarshalJSON writes the flat MLX map, defaults first, then modules in sorted order.
func (q Quantization) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"group_size":%d,"bits":%d`, q.GroupSize, q.Bits)
	if q.Mode != "" {
		mode, err := json.Marshal(q.Mode)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&buf, `,"mode":%s`, mode)
	}
	names := make([]string, 0, len(q.Modules))
	for k := range q.Modules {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		m := q.Modules[k]
		key, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		var val []byte
		if m.Quantized {
			val, err = json.Marshal(quantParams{GroupSize: m.GroupSize, Bits: m.Bits, Mode: m.Mode})
		} else {
			val = []byte("false")
		}
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&buf, ",%s:%s", key, val)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// validBits and validGroupSize are the quantization parameters the engines support
// (product.md §2).
func validBits(b int) bool {
	switch b {
	case 2, 3, 4, 5, 6, 8:
		return true
	}
	return false
}

func validGroupSize(g int) bool { return g == 32 || g == 64 || g == 128 }
