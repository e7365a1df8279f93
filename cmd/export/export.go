package main

import (
	"context"
	"fmt"
	"io"

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

// checkAgainstModel checks f against --model's geometry (config.json alone, no weights
// read) when --model is given.
func (x *exporter) checkAgainstModel(f *lora.AdapterFile) error {
	if x.model == "" {
		return nil
	}
	cfg, err := dg.LoadConfig(x.model)
	if err != nil {
		return fmt.Errorf("--model: %w", err)
	}
	if err := lora.CheckGeometry(cfg, f); err != nil {
		return fmt.Errorf("the model in %s: %w", x.model, err)
	}
	return nil
}

func (x *exporter) writeAdapter(f *lora.AdapterFile, format, base, summary string) error {
	err := x.writeStaged(func(dir string) error {
		if format == formatPEFT {
			return lora.ExportPEFT(f, dir, base)
		}
		f.Config.BaseModel = base
		return f.Write(dir)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(x.stdout, "%s; wrote %s (%s layout)\n", summary, x.out, format)
	return nil
}
