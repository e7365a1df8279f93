package data

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/dgtune/dgtune/imageproc"
)

// pngBytes is a w×h single-colour PNG.
func pngBytes(t *testing.T, w, h int, c color.NRGBA) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		copy(img.Pix[i:], []uint8{c.R, c.G, c.B, c.A})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// imageDir writes red.png (20×10), blue.png (8×8) and a truncated cut.png under dir/img.
func imageDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "img"), 0o755); err != nil {
		t.Fatal(err)
	}
	red := pngBytes(t, 20, 10, color.NRGBA{255, 0, 0, 255})
	writeFile(t, filepath.Join(dir, "img", "red.png"), string(red))
	writeFile(t, filepath.Join(dir, "img", "blue.png"), string(pngBytes(t, 8, 8, color.NRGBA{0, 0, 255, 255})))
	writeFile(t, filepath.Join(dir, "img", "cut.png"), string(red[:len(red)/2]))
	return dir
}

// Chat rows with content parts: image parts become <|image|> placeholders where they
// stand (text parts trimmed, nothing in between), paths resolve against the data file's
// directory, images come in placeholder order across messages, and a file used twice is
// read once.
func TestReadJSONLImages(t *testing.T) {
	dir := imageDir(t)
	path := filepath.Join(dir, "train.jsonl")
	writeFile(t, path, strings.Join([]string{
		`{"messages":[{"role":"user","content":[{"type":"image","path":"img/red.png"},{"type":"text","text":" What colour? "}]},{"role":"assistant","content":"red"}]}`,
		`{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Compare"},{"type":"image","path":"img/blue.png"},{"type":"text","text":"and"},{"type":"image","image":"img/red.png"}]},{"role":"assistant","content":[{"type":"text","text":"blue, red"}]}]}`,
		`{"prompt":"no image","completion":"ok"}`,
	}, "\n"))
	ex := readOne(t, path, Options{})
	if len(ex) != 3 {
		t.Fatalf("%d examples, want 3", len(ex))
	}
	if got := ex[0].Prompt[0].Content; got != "<|image|>What colour?" {
		t.Errorf("content = %q, want %q", got, "<|image|>What colour?")
	}
	if got := ex[1].Prompt[1].Content; got != "Compare<|image|>and<|image|>" {
		t.Errorf("content = %q, want %q", got, "Compare<|image|>and<|image|>")
	}
	if ex[1].Completion != "blue, red" {
		t.Errorf("completion from text parts = %q, want %q", ex[1].Completion, "blue, red")
	}
	if len(ex[0].Images) != 1 || len(ex[1].Images) != 2 || ex[2].Images != nil {
		t.Fatalf("images per example %d, %d, %v; want 1, 2, nil", len(ex[0].Images), len(ex[1].Images), ex[2].Images)
	}
	red, blue := ex[0].Images[0], ex[1].Images[0]
	if red.Width != 20 || red.Height != 10 || red.Format != "png" || blue.Width != 8 {
		t.Errorf("red %d×%d %s, blue width %d; want 20×10 png, 8", red.Width, red.Height, red.Format, blue.Width)
	}
	if ex[1].Images[1] != red {
		t.Error("img/red.png used by two rows was read twice")
	}
	if red.Name != filepath.Join(dir, "img", "red.png") {
		t.Errorf("source name %q, want the resolved path", red.Name)
	}
}

// Bad image rows name the file, the line, the part and the problem; with SkipBadRows
// they are skipped and counted.
func TestImageBadRows(t *testing.T) {
	dir := imageDir(t)
	chatRow := func(parts string) string {
		return `{"messages":[{"role":"user","content":[` + parts + `]},{"role":"assistant","content":"x"}]}`
	}
	for _, c := range []struct {
		row  string
		want string
		is   error
	}{
		{chatRow(`{"type":"image","path":"img/missing.png"}`), `"messages"[0].content[0]: imageproc: open ` + filepath.Join(dir, "img", "missing.png"), fs.ErrNotExist},
		{chatRow(`{"type":"text","text":"see"},{"type":"image","path":"img/cut.png"}`), `"messages"[0].content[1]: imageproc: ` + filepath.Join(dir, "img", "cut.png") + `: truncated or corrupt image`, imageproc.ErrCorrupt},
		{chatRow(`{"type":"image","path":"train.jsonl"}`), `"messages"[0].content[0]: imageproc: ` + filepath.Join(dir, "train.jsonl") + `: unsupported image format (want PNG, JPEG or GIF)`, imageproc.ErrUnsupported},
		{chatRow(`{"type":"image","path":"img/empty.png"}`), `"messages"[0].content[0]: imageproc: ` + filepath.Join(dir, "img", "empty.png") + `: empty file`, imageproc.ErrEmpty},
		{chatRow(`{"type":"image"}`), `"messages"[0]: "content"[0]: image part needs "path"`, nil},
		{chatRow(`{"type":"audio","path":"a.wav"}`), `"messages"[0]: "content"[0]: unknown part type "audio" (want "text" or "image")`, nil},
		{chatRow(`{"text":"hi"}`), `"messages"[0]: "content"[0]: missing "type"`, nil},
		{chatRow(`{"type":"text"}`), `"messages"[0]: "content"[0]: missing "text"`, nil},
		{chatRow(`"hi"`), `"messages"[0]: "content"[0] is a string, want a part object`, nil},
		{chatRow(`{"type":"text","text":"a <|image|> b"}`), `"messages"[0]: "content"[0]: text contains the image placeholder <|image|>; use an image part`, nil},
		{`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"image","path":"img/red.png"}]}]}`,
			`"messages"[1].content[0]: the final assistant turn holds an image; images belong in the prompt`, nil},
	} {
		writeFile(t, filepath.Join(dir, "img", "empty.png"), "")
		path := filepath.Join(dir, "train.jsonl")
		writeFile(t, path, chatRow(`{"type":"image","path":"img/red.png"}`)+"\n"+c.row+"\n")
		_, err := ReadFile(path, Options{})
		want := "data: train.jsonl:2: " + c.want
		if !strings.HasPrefix(errString(err), want) {
			t.Errorf("row %s:\n got %s\nwant prefix %s", c.row, errString(err), want)
		}
		var rerr *RowError
		if !errors.As(err, &rerr) || rerr.Line != 2 {
			t.Errorf("row %s: error %v is not a RowError for line 2", c.row, err)
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("row %s: error %v does not wrap %v", c.row, err, c.is)
		}
		s, err := ReadFile(path, Options{SkipBadRows: true})
		if err != nil || len(s.Examples) != 1 || s.Stats.Skipped != 1 {
			t.Errorf("row %s with SkipBadRows: %v, %d examples, %d skipped; want 1 kept, 1 skipped", c.row, err, len(s.Examples), s.Stats.Skipped)
		}
	}
}

// partsField is messages: list<struct<role, content: list<struct<type, text, path, image>>>>,
// where image is binary (the image's bytes).
func partsField() arrow.Field {
	part := arrow.StructOf(str("type"), str("text"), str("path"), arrow.Field{Name: "image", Type: arrow.BinaryTypes.Binary, Nullable: true})
	msg := arrow.StructOf(str("role"), arrow.Field{Name: "content", Type: arrow.ListOf(part), Nullable: true})
	return arrow.Field{Name: "messages", Type: arrow.ListOf(msg), Nullable: true}
}

// partRow is one content part for writeParts; data nil and path "" leave the fields null.
type partRow struct {
	typ, text, path string
	data            []byte
}

// writeParts writes conversations of (role, parts) messages to a parquet file.
func writeParts(t *testing.T, path string, rows [][]struct {
	role  string
	parts []partRow
}) {
	t.Helper()
	writeRecord(t, path, []arrow.Field{partsField()}, func(rb *array.RecordBuilder) {
		lb := rb.Field(0).(*array.ListBuilder)
		mb := lb.ValueBuilder().(*array.StructBuilder)
		role := mb.FieldBuilder(0).(*array.StringBuilder)
		cb := mb.FieldBuilder(1).(*array.ListBuilder)
		pb := cb.ValueBuilder().(*array.StructBuilder)
		typ, text, pth := pb.FieldBuilder(0).(*array.StringBuilder), pb.FieldBuilder(1).(*array.StringBuilder), pb.FieldBuilder(2).(*array.StringBuilder)
		img := pb.FieldBuilder(3).(*array.BinaryBuilder)
		opt := func(b *array.StringBuilder, s string) {
			if s == "" {
				b.AppendNull()
			} else {
				b.Append(s)
			}
		}
		for _, conv := range rows {
			lb.Append(true)
			for _, m := range conv {
				mb.Append(true)
				role.Append(m.role)
				cb.Append(true)
				for _, p := range m.parts {
					pb.Append(true)
					typ.Append(p.typ)
					opt(text, p.text)
					opt(pth, p.path)
					if p.data == nil {
						img.AppendNull()
					} else {
						img.Append(p.data)
					}
				}
			}
		}
	})
}

// Parquet rows carry images as bytes in the part (or as a path); bad bytes are a bad row
// at its 0-based row index.
func TestReadParquetImages(t *testing.T) {
	dir := imageDir(t)
	green := pngBytes(t, 12, 6, color.NRGBA{0, 200, 0, 255})
	type msg = struct {
		role  string
		parts []partRow
	}
	conv := func(parts ...partRow) []msg {
		return []msg{{"user", parts}, {"assistant", []partRow{{typ: "text", text: "green"}}}}
	}
	path := filepath.Join(dir, "train.parquet")
	writeParts(t, path, [][]msg{
		conv(partRow{typ: "image", data: green}, partRow{typ: "text", text: "Colour?"}),
		conv(partRow{typ: "text", text: "Which?"}, partRow{typ: "image", path: "img/blue.png"}),
	})
	ex := readOne(t, path, Options{})
	if len(ex) != 2 || ex[0].Prompt[0].Content != "<|image|>Colour?" || ex[1].Prompt[0].Content != "Which?<|image|>" {
		t.Fatalf("examples %+v", ex)
	}
	if ex[0].Completion != "green" || len(ex[0].Images) != 1 || ex[0].Images[0].Width != 12 || !bytes.Equal(ex[0].Images[0].Data, green) {
		t.Errorf("row 0: completion %q, images %v", ex[0].Completion, ex[0].Images)
	}
	if len(ex[1].Images) != 1 || ex[1].Images[0].Width != 8 {
		t.Errorf("row 1: images %v, want blue.png (8 wide)", ex[1].Images)
	}

	writeParts(t, path, [][]msg{
		conv(partRow{typ: "image", data: green}),
		conv(partRow{typ: "image", data: green[:30]}),
	})
	_, err := ReadFile(path, Options{})
	if want := `data: train.parquet: row 2: "messages"[0].content[0]: imageproc: image bytes: truncated or corrupt image: unexpected EOF`; !strings.HasPrefix(errString(err), want) {
		t.Errorf("got %s\nwant prefix %s", errString(err), want)
	}
}

// Tokenize hands the images to the pair.
func TestTokenizeKeepsImages(t *testing.T) {
	dir := imageDir(t)
	path := filepath.Join(dir, "train.jsonl")
	writeFile(t, path, `{"messages":[{"role":"user","content":[{"type":"image","path":"img/red.png"}]},{"role":"assistant","content":"red"}]}`+"\n")
	s, err := ReadFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pairs, _, err := Tokenize(s, byteEncoder, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 1 || len(pairs[0].Images) != 1 || pairs[0].Images[0] != s.Examples[0].Images[0] {
		t.Errorf("pairs %+v do not carry the example's image", pairs)
	}
}
