package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dgtune/dgtune/internal/atomicfile"
	"github.com/dgtune/dgtune/internal/cli"
)

// writeStaged runs write on a hidden directory beside --out (atomicfile.StageDir) and
// moves it into place only once write has succeeded and no SIGINT/SIGTERM came first. A
// failure, a signal, or cli.Main abandoning the export after one removes the hidden
// directory and any parent directories it created, so nothing is left. --out must be
// free (absent, or an empty directory) when the export starts and when it is moved in.
func (x *exporter) writeStaged(write func(dir string) error) error {
	if err := x.interrupted(); err != nil {
		return err
	}
	out := filepath.Clean(x.out)
	if err := checkFree(out); err != nil {
		return err
	}
	st, err := atomicfile.StageDir(out)
	if err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	defer st.Remove()
	defer cli.OnAbandon(x.ctx, st.Remove)()
	if err := write(st.Path); err != nil {
		return err
	}
	if err := x.interrupted(); err != nil {
		return err
	}
	if err := checkFree(out); err != nil {
		return err
	}
	if err := st.Replace(); err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	return nil
}

// interrupted is cli.Interrupted once a signal has cancelled the export's context.
func (x *exporter) interrupted() error {
	if x.ctx.Err() != nil {
		return cli.Interrupted(x.ctx)
	}
	return nil
}

// checkFree accepts a destination that does not exist or is an empty directory.
func checkFree(out string) error {
	st, err := os.Stat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("--out %s exists and is not a directory", out)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("--out %s exists and is not empty (refusing to overwrite it)", out)
	}
	return nil
}
