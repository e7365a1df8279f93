// Package data reads fine-tuning datasets and turns them into the token pairs the
// trainer iterates over.
//
// A data directory holds the splits train, valid and test, each as train.jsonl or
// train.parquet (and so on); only train is required, and a split present in both formats
// is an error because silently preferring one would train on the wrong file.
//
// Rows come in three formats, recognised per row (so one file may mix them):
//
//	{"prompt": "...", "completion": "..."}   one user turn → completion
//	{"messages": [{"role": ..., "content": ...}, ...]}
//	                                         the last message is the target and must be an
//	                                         assistant (or model) turn; every earlier
//	                                         message is the prompt conversation
//	{"text": "..."}                          no prompt; the whole text is the target
//
// A message's content may also be a list of parts, as in the HF/OpenAI multimodal form:
//
//	{"role": "user", "content": [{"type": "image", "path": "img/cat.png"},
//	                             {"type": "text", "text": "What is this?"}]}
//
// Text parts are trimmed and joined with nothing in between; each image part becomes the
// chat template's <|image|> placeholder at its place (the model code expands it into the
// image's soft tokens). Image paths are relative to the data file ("image" is accepted for
// "path"); parquet parts may carry the image's bytes instead, as binary "image" or
// "bytes" (or an HF Image struct<bytes, path>), with content typed
// list<struct<type, text, path, image>>. Images are allowed in prompt turns only. Every
// image is read and fully decoded when the file is read, so a missing, empty, truncated,
// unsupported or oversized image is a bad row naming the part
// ("data: train.jsonl:3: \"messages\"[0].content[0]: imageproc: ...: truncated or corrupt
// image"); [Example.Images] keeps the checked, still-compressed files in placeholder order.
//
// When a row carries several formats the first match in that order wins, as in mlx-lm
// (a row with "prompt" but no "completion" is a bad row, not a text row). A JSON null
// counts as absent, as does a null parquet cell, so tables exported with a column per
// format read the same from either file type. The feature names are renamable through
// [Options]. Parquet files hold the same fields as columns: strings for
// prompt/completion/text and messages as list<struct<role: string, content: string>>;
// [WriteParquet] writes such files.
//
// A bad row is an error that names the file and position — a 1-based line for .jsonl
// ("data: train.jsonl:17: missing \"completion\"") and a 0-based row index, as pandas and
// pyarrow count, for .parquet ("data: train.parquet: row 16: ...") — unless
// Options.SkipBadRows is set, in which case it is skipped and counted in the split's
// [Stats]. Blank lines in a .jsonl file are not rows.
//
// [Tokenize] applies a caller-supplied [Encoder] (chat template, truncation) to a split,
// and an [Iterator] hands the resulting pairs to the trainer in reproducible, resumable
// batches.
package data
