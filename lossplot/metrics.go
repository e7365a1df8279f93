package lossplot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// Point is one value at one step.
type Point struct {
	Step  int
	Value float64
}

// Series is what the plot draws, in the file's order: the mean train loss of each train
// report, the validation losses (non-finite ones, written as null, are left out) and the
// learning rate of each train report.
type Series struct {
	Train, Val, LearningRate []Point
}

// Empty reports whether s has nothing to draw.
func (s Series) Empty() bool { return len(s.Train) == 0 && len(s.Val) == 0 }

// Best returns the validation point with the lowest loss (the first of equal ones, as
// train keeps best_adapters.safetensors), and false when there is none.
func (s Series) Best() (Point, bool) {
	if len(s.Val) == 0 {
		return Point{}, false
	}
	best := s.Val[0]
	for _, p := range s.Val[1:] {
		if p.Value < best.Value {
			best = p
		}
	}
	return best, true
}

// event is one line of metrics.jsonl, as far as the plot needs it. Pointers tell a
// missing field from a zero.
type event struct {
	Event        string   `json:"event"`
	Iteration    *int     `json:"iteration"`
	TrainLoss    *float64 `json:"train_loss"`
	LearningRate *float64 `json:"learning_rate"`
	ValLoss      *float64 `json:"val_loss"`
	// Error is what train writes instead of an event it could not encode.
	Error string `json:"error"`
}

// Read parses the metrics file at path; see Parse.
func Read(path string) (Series, error) {
	f, err := os.Open(path)
	if err != nil {
		return Series{}, fmt.Errorf("metrics: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads metrics.jsonl lines from r; name is the file's name in errors, which give
// its line (counted from 1): every non-empty line must be a JSON object with an "event";
// train events need "iteration", "train_loss" and "learning_rate", val events
// "iteration" and "val_loss" (null for a non-finite loss, which is left out). Events of
// other kinds are skipped, so are the error lines train writes for an event it could not
// encode.
func Parse(r io.Reader, name string) (Series, error) {
	var s Series
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if err := s.add(b); err != nil {
			return Series{}, fmt.Errorf("metrics: %s:%d: %w", name, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return Series{}, fmt.Errorf("metrics: %s: %w", name, err)
	}
	return s, nil
}

var errNoEvent = errors.New(`not a metrics event (no "event" field)`)

func (s *Series) add(line []byte) error {
	var ev event
	if err := json.Unmarshal(line, &ev); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("invalid JSON: %v", err)
		}
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			return fmt.Errorf("%q is a JSON %s, want a %s", typ.Field, typ.Value, jsonKind(typ.Type.String()))
		}
		return errNoEvent
	}
	if ev.Event == "" {
		return errNoEvent
	}
	if ev.Error != "" {
		return nil
	}
	switch ev.Event {
	case "train":
		if err := need(ev.Iteration != nil, "train", "iteration"); err != nil {
			return err
		}
		if err := need(ev.TrainLoss != nil, "train", "train_loss"); err != nil {
			return err
		}
		if err := need(ev.LearningRate != nil, "train", "learning_rate"); err != nil {
			return err
		}
		s.Train = append(s.Train, Point{*ev.Iteration, *ev.TrainLoss})
		s.LearningRate = append(s.LearningRate, Point{*ev.Iteration, *ev.LearningRate})
	case "val":
		if err := need(ev.Iteration != nil, "val", "iteration"); err != nil {
			return err
		}
		if !hasKey(line, "val_loss") {
			return need(false, "val", "val_loss")
		}
		if ev.ValLoss != nil && !math.IsNaN(*ev.ValLoss) {
			s.Val = append(s.Val, Point{*ev.Iteration, *ev.ValLoss})
		}
	}
	return nil
}

// jsonKind names a Go field type of event as JSON calls it.
func jsonKind(goType string) string {
	if goType == "string" {
		return "string"
	}
	return "number"
}

func need(ok bool, kind, field string) error {
	if ok {
		return nil
	}
	return fmt.Errorf("%s event without %q", kind, field)
}

// hasKey reports whether the JSON object line has the key (null values included).
func hasKey(line []byte, key string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return false
	}
	_, ok := m[key]
	return ok
}
