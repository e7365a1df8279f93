package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/dgtune/dgtune/internal/cli"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
)

// exporter carries what every mode needs.
type exporter struct {
	e      mx.Engine
	model  string // --model (config key), "" when not given
	out    string
	seed   uint64 // probe input of --fuse
	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
}

// convert writes one adapter in the given layout.
func (x *exporter) convert(adapterDir, format string) error {
	f, err := loadAdapter(x.e, adapterDir)
	if err != nil {
		return err
	}
	base := x.baseName(f)
	if err := x.checkAgainstModel(f); err != nil {
		return err
	}
	return x.writeAdapter(f, format, base, fmt.Sprintf("exported %s (rank %d, scale %g, %d modules)", adapterDir, f.Rank(), f.Scale(), len(f.Modules)))
}

// merge writes A and B concatenated along the rank axis.
func (x *exporter) merge(dirA, dirB, format string) error {
	a, err := loadAdapter(x.e, dirA)
	if err != nil {
		return err
	}
	b, err := loadAdapter(x.e, dirB)
	if err != nil {
		return err
	}
	m, err := lora.Merge(a, b)
	if err != nil {
		return err
	}
	if ba, bb := a.Config.BaseModel, b.Config.BaseModel; ba != "" && bb != "" && ba != bb {
		fmt.Fprintf(x.stderr, "warning: the adapters name different base models (%s, %s); the merged one records %s\n", ba, bb, m.Config.BaseModel)
	}
	if err := x.checkAgainstModel(m); err != nil {
		return err
	}
	return x.writeAdapter(m, format, x.baseName(m), fmt.Sprintf("merged %s (rank %d, scale %g) and %s (rank %d, scale %g) into rank %d, scale 1",
		dirA, a.Rank(), a.Scale(), dirB, b.Rank(), b.Scale(), m.Rank()))
}

// baseName is what the export records as its base model: --model when given, else the
// adapter's own base_model.
func (x *exporter) baseName(f *lora.AdapterFile) string {
	if x.model != "" {
		return x.model
	}
	return f.Config.BaseModel
}

// checkAgainstModel checks f against --model's geometry (config.json alone) when --model
// is given.
func (x *exporter) checkAgainstModel(f *lora.AdapterFile) error {
	if x.model == "" {
		return nil
	}
	cfg, err := dg.LoadConfig(x.model)
	if err != nil {
		return fmt.Errorf("--model: %w", err)
	}
	return checkGeometry(cfg, x.model, f)
}

func (x *exporter) writeAdapter(f *lora.AdapterFile, format, base, summary string) error {
	st, err := x.stage()
	if err != nil {
		return err
	}
	defer st.abort()
	switch format {
	case formatPEFT:
		err = lora.ExportPEFT(f, st.tmp, base)
	default:
		f.Config.BaseModel = base
		err = f.Write(st.tmp)
	}
	if err != nil {
		return err
	}
	if err := x.commit(st); err != nil {
		return err
	}
	fmt.Fprintf(x.stdout, "%s; wrote %s (%s layout)\n", summary, x.out, format)
	return nil
}

// stage starts the output in a hidden directory that is removed if the export fails, is
// interrupted or is abandoned by cli.Main after a signal.
func (x *exporter) stage() (*staging, error) {
	if err := x.interrupted(); err != nil {
		return nil, err
	}
	st, err := newStaging(x.out)
	if err != nil {
		return nil, err
	}
	st.release = cli.OnAbandon(x.ctx, st.abort)
	return st, nil
}

// commit moves the output into place unless SIGINT/SIGTERM came first.
func (x *exporter) commit(st *staging) error {
	if err := x.interrupted(); err != nil {
		return err
	}
	return st.commit()
}

// interrupted is cli.Interrupted once a signal has cancelled the export's context.
func (x *exporter) interrupted() error {
	if x.ctx.Err() != nil {
		return cli.Interrupted(x.ctx)
	}
	return nil
}

// checkGeometry checks every adapter tensor against the linears cfg declares (shapes from
// the tensor table, so no weights are read): A must be [in, r] and B [r, out]. The error
// (a lora.MismatchError) names the adapter's base_model and the first problem.
func checkGeometry(cfg *dg.Config, modelDir string, f *lora.AdapterFile) error {
	geom := map[string][2]int{} // module → [in, out]
	for _, ts := range dg.ExpectedTensors(cfg) {
		if ts.Kind == dg.KindLinear {
			geom[ts.Module] = [2]int{ts.Shape[1], ts.Shape[0]}
		}
	}
	r := f.Rank()
	var problems []string
	bad := 0
	for _, mod := range f.ModuleNames() {
		w := f.Modules[mod]
		g, ok := geom[mod]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: the model has no such linear", mod))
			bad++
			continue
		}
		n := len(problems)
		if want := []int{g[0], r}; !slices.Equal(w.A.Shape(), want) {
			problems = append(problems, fmt.Sprintf("%s.lora_a: adapter %v, model %v", mod, w.A.Shape(), want))
		}
		if want := []int{r, g[1]}; !slices.Equal(w.B.Shape(), want) {
			problems = append(problems, fmt.Sprintf("%s.lora_b: adapter %v, model %v", mod, w.B.Shape(), want))
		}
		if len(problems) > n {
			bad++
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("the model in %s: %w", modelDir, &lora.MismatchError{BaseModel: f.Config.BaseModel, Rank: r,
		Modules: len(f.Modules), BadModules: bad, Problems: problems})
}
