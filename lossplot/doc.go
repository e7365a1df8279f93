// Package lossplot draws a training run's curves: train and validation loss over steps,
// and the learning rate below them, read from the run's metrics.jsonl and drawn with
// gonum/plot into a PNG (loss.png in the run's directory).
//
// It reads the file on its own (train writes it, and imports this package to draw the
// plot at the end of a run), so it knows only the fields it draws: "event", "iteration",
// "train_loss", "learning_rate" and "val_loss".
package lossplot
