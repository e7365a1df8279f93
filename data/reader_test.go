package data

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/data/chat"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeParquet(t *testing.T, path string, cols ...ParquetColumn) {
	t.Helper()
	if err := WriteParquetFile(path, cols...); err != nil {
		t.Fatal(err)
	}
}

func user(s string) []chat.Message { return []chat.Message{{Role: "user", Content: s}} }

func strs(s ...string) []string { return s }

func msgs(roleContent ...string) []chat.Message {
	var m []chat.Message
	for i := 0; i < len(roleContent); i += 2 {
		m = append(m, chat.Message{Role: roleContent[i], Content: roleContent[i+1]})
	}
	return m
}

func readOne(t *testing.T, path string, opts Options) []Example {
	t.Helper()
	s, err := ReadFile(path, opts)
	if err != nil {
		t.Fatalf("ReadFile(%s): %v", filepath.Base(path), err)
	}
	return s.Examples
}

func checkExamples(t *testing.T, got, want []Example) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("examples:\n got %#v\nwant %#v", got, want)
	}
}

// Each format in JSONL, with blank lines (not rows, but counted as lines), CRLF line
// ends, a BOM, extra fields, and precedence when a row carries several formats.
func TestReadJSONLFormats(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "train.jsonl")
	writeFile(t, path, "\uFEFF"+`{"prompt":"What is 2+2?","completion":"4","id":7}`+"\r\n"+
		"\n"+
		`{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"model","content":"Hello"}]}`+"\n"+
		`{"text":"plain text"}`+"\n"+
		`{"messages":[{"role":"assistant","content":"only"}]}`+"\n"+
		`{"prompt":"","completion":"x","text":null}`+"\n"+
		`{"prompt":"p","completion":"c","messages":[{"role":"assistant","content":"m"}],"text":"t"}`+"\n"+
		`{"messages":[{"role":"user","content":"u"},{"role":"assistant","content":"m"}],"text":"t"}`) // no final newline
	want := []Example{
		{Index: 0, Line: 1, Prompt: user("What is 2+2?"), Completion: "4"},
		{Index: 1, Line: 3, Prompt: msgs("system", "Be brief.", "user", "Hi"), Completion: "Hello"},
		{Index: 2, Line: 4, Completion: "plain text"},
		{Index: 3, Line: 5, Completion: "only"},
		{Index: 4, Line: 6, Prompt: user(""), Completion: "x"},
		{Index: 5, Line: 7, Prompt: user("p"), Completion: "c"},         // prompt/completion wins
		{Index: 6, Line: 8, Prompt: msgs("user", "u"), Completion: "m"}, // messages beat text
	}
	s, err := ReadFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkExamples(t, s.Examples, want)
	if s.Name != "train" || s.Path != path || s.Stats.Rows != 7 || s.Stats.Skipped != 0 {
		t.Errorf("split = {%q %q %+v}, want {train %q Rows:7}", s.Name, s.Path, s.Stats, path)
	}
}

func TestReadParquetFormats(t *testing.T) {
	dir := t.TempDir()
	conv := msgs("system", "Be brief.", "user", "Hi", "assistant", "Hello")
	tests := []struct {
		name string
		cols []ParquetColumn
		want []Example
	}{
		{"prompt-completion", []ParquetColumn{
			{Name: "prompt", Strings: strs("a", "b")},
			{Name: "completion", Strings: strs("1", "2")},
			{Name: "unrelated", Strings: strs("x", "y")},
		}, []Example{
			{Index: 0, Line: 1, Prompt: user("a"), Completion: "1"},
			{Index: 1, Line: 2, Prompt: user("b"), Completion: "2"},
		}},
		{"messages", []ParquetColumn{
			{Name: "messages", Messages: [][]chat.Message{conv, msgs("model", "m")}},
		}, []Example{
			{Index: 0, Line: 1, Prompt: conv[:2], Completion: "Hello"},
			{Index: 1, Line: 2, Completion: "m"},
		}},
		{"text", []ParquetColumn{
			{Name: "text", Strings: strs("t0", "t1", "t2")},
		}, []Example{
			{Index: 0, Line: 1, Completion: "t0"},
			{Index: 1, Line: 2, Completion: "t1"},
			{Index: 2, Line: 3, Completion: "t2"},
		}},
		// One column per format, nulls where a row uses another format (as a table
		// concatenated from differently shaped sources is stored).
		{"mixed", []ParquetColumn{
			{Name: "prompt", Strings: strs("p", "", ""), Null: []bool{false, true, true}},
			{Name: "completion", Strings: strs("c", "", ""), Null: []bool{false, true, true}},
			{Name: "messages", Messages: [][]chat.Message{nil, conv, nil}, Null: []bool{true, false, true}},
			{Name: "text", Strings: strs("", "", "t"), Null: []bool{true, true, false}},
		}, []Example{
			{Index: 0, Line: 1, Prompt: user("p"), Completion: "c"},
			{Index: 1, Line: 2, Prompt: conv[:2], Completion: "Hello"},
			{Index: 2, Line: 3, Completion: "t"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".parquet")
			writeParquet(t, path, tt.cols...)
			checkExamples(t, readOne(t, path, Options{}), tt.want)
		})
	}
}

func TestRenamedFeatures(t *testing.T) {
	dir := t.TempDir()
	opts := Options{PromptFeature: "question", CompletionFeature: "answer", TextFeature: "body", ChatFeature: "conversation"}
	want := []Example{
		{Index: 0, Line: 1, Prompt: user("q"), Completion: "a"},
		{Index: 1, Line: 2, Prompt: msgs("user", "u"), Completion: "m"},
		{Index: 2, Line: 3, Completion: "b"},
	}

	jl := filepath.Join(dir, "train.jsonl")
	writeFile(t, jl, `{"question":"q","answer":"a","prompt":"ignored"}
{"conversation":[{"role":"user","content":"u"},{"role":"assistant","content":"m"}]}
{"body":"b","text":"ignored"}
`)
	wantJSONL := append([]Example(nil), want...)
	for i := range wantJSONL {
		wantJSONL[i].Line = i + 1 // JSONL lines count from 1
	}
	checkExamples(t, readOne(t, jl, opts), wantJSONL)

	pq := filepath.Join(dir, "train.parquet")
	writeParquet(t, pq,
		ParquetColumn{Name: "question", Strings: strs("q", "", ""), Null: []bool{false, true, true}},
		ParquetColumn{Name: "answer", Strings: strs("a", "", ""), Null: []bool{false, true, true}},
		ParquetColumn{Name: "conversation", Messages: [][]chat.Message{nil, msgs("user", "u", "assistant", "m"), nil}, Null: []bool{true, false, true}},
		ParquetColumn{Name: "body", Strings: strs("", "", "b"), Null: []bool{true, true, false}},
		ParquetColumn{Name: "text", Strings: strs("ignored", "ignored", "ignored")},
	)
	checkExamples(t, readOne(t, pq, opts), want)

	// With the default names the renamed file has no recognised field on its first row.
	_, err := ReadFile(jl, Options{TextFeature: "body"})
	if got, want := errString(err), `data: train.jsonl:1: missing "completion"`; got != want {
		t.Errorf("default names: err = %s, want %s", got, want)
	}
}

func TestOptionsConflict(t *testing.T) {
	_, err := LoadDir(t.TempDir(), Options{TextFeature: "prompt"})
	if got, want := errString(err), `data: prompt_feature and text_feature are both "prompt"`; got != want {
		t.Errorf("err = %s, want %s", got, want)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// jsonlBadRows are single JSONL rows and the problem each must be reported with.
var jsonlBadRows = []struct{ row, problem string }{
	{`{"prompt":"p"}`, `missing "completion"`},
	{`{"completion":"c"}`, `missing "prompt"`},
	{`{"prompt":"p","completion":null}`, `missing "completion"`},
	{`{"prompt":1,"completion":"c"}`, `"prompt" is a number, want a string`},
	{`{"prompt":"p","completion":["c"]}`, `"completion" is an array, want a string`},
	{`{"prompt":{},"completion":"c"}`, `"prompt" is an object, want a string`},
	{`{"prompt":"p","completion":""}`, `empty "completion"`},
	{`{"text":""}`, `empty "text"`},
	{`{"text":true}`, `"text" is a boolean, want a string`},
	{`{"other":"x"}`, `none of "prompt"/"completion", "messages" or "text"`},
	{`{}`, `none of "prompt"/"completion", "messages" or "text"`},
	{`{"text":null,"messages":null}`, `none of "prompt"/"completion", "messages" or "text"`},
	{`{"messages":"hi"}`, `"messages" is a string, want a list of messages`},
	{`{"messages":{"role":"user"}}`, `"messages" is an object, want a list of messages`},
	{`{"messages":[]}`, `"messages" is empty`},
	{`{"messages":[1]}`, `"messages"[0] is a number, want an object`},
	{`{"messages":[null]}`, `"messages"[0] is null, want an object`},
	{`{"messages":[{"content":"x"}]}`, `"messages"[0]: missing "role"`},
	{`{"messages":[{"role":null,"content":"x"}]}`, `"messages"[0]: missing "role"`},
	{`{"messages":[{"role":"user"}]}`, `"messages"[0]: missing "content"`},
	{`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":5}]}`, `"messages"[1]: "content" is a number, want a string`},
	{`{"messages":[{"role":"bot","content":"x"}]}`, `"messages"[0]: unknown role "bot" (want system, user, assistant or model)`},
	{`{"messages":[{"role":"user","content":"q"}]}`, `"messages" does not end with an assistant turn (last role is "user")`},
	{`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"},{"role":"user","content":"q2"}]}`,
		`"messages" does not end with an assistant turn (last role is "user")`},
	{`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":""}]}`, `"messages": final assistant turn is empty`},
	// Malformed JSON: encoding/json reports the byte count read when it failed. In
	// {"a":1,} the '}' is the 8th byte; in {"a":1} x the 'x' is the 9th; the truncated
	// {"a": ends after 5 bytes.
	{`{"a":1,}`, `invalid JSON at byte 8: invalid character '}' looking for beginning of object key string`},
	{`{"a":1} x`, `invalid JSON at byte 9: invalid character 'x' after top-level value`},
	{`{"a":`, `invalid JSON at byte 5: unexpected end of JSON input`},
	{`[1,2]`, `row is an array, want an object`},
	{`"text"`, `row is a string, want an object`},
	{`null`, `row is null, want an object`},
	// Bytes that are not UTF-8 (Latin-1 é, a lone continuation byte, a cut sequence):
	// encoding/json would read each as U+FFFD.
	{"{\"prompt\":\"caf\xe9\",\"completion\":\"c\"}", `invalid UTF-8 at byte 15 (0xe9): the file must be UTF-8 text`},
	{"{\"text\":\"\x80\"}", `invalid UTF-8 at byte 10 (0x80): the file must be UTF-8 text`},
	{"{\"text\":\"ok \xe2\x82\"}", `invalid UTF-8 at byte 13 (0xe2): the file must be UTF-8 text`},
}

// Every bad row is reported on its own line (2, after a good line 1) in the exact form
// file:line: problem.
func TestJSONLBadRows(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "train.jsonl")
	for _, tt := range jsonlBadRows {
		writeFile(t, path, `{"text":"ok"}`+"\n"+tt.row+"\n"+`{"text":"ok"}`+"\n")
		_, err := ReadFile(path, Options{})
		want := "data: train.jsonl:2: " + tt.problem
		if got := errString(err); got != want {
			t.Errorf("ReadFile(%#q) error = %s, want %s", tt.row, got, want)
		}
		var rerr *RowError
		if !errors.As(err, &rerr) || rerr.Line != 2 {
			t.Errorf("ReadFile(%#q): error %v is not a *RowError at line 2", tt.row, err)
		}
	}
}

func TestParquetBadRows(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		cols    []ParquetColumn
		problem string
	}{
		{"null prompt", []ParquetColumn{
			{Name: "prompt", Strings: strs("p", ""), Null: []bool{false, true}},
			{Name: "completion", Strings: strs("c", "c")},
		}, `row 2: missing "prompt"`},
		{"no completion column", []ParquetColumn{
			{Name: "prompt", Strings: strs("p", "q")},
		}, `row 1: missing "completion"`},
		{"empty completion", []ParquetColumn{
			{Name: "prompt", Strings: strs("p", "q")},
			{Name: "completion", Strings: strs("c", "")},
		}, `row 2: empty "completion"`},
		{"empty text", []ParquetColumn{
			{Name: "text", Strings: strs("t", "")},
		}, `row 2: empty "text"`},
		{"all null", []ParquetColumn{
			{Name: "text", Strings: strs("t", ""), Null: []bool{false, true}},
		}, `row 2: none of "prompt"/"completion", "messages" or "text"`},
		{"no feature columns", []ParquetColumn{
			{Name: "other", Strings: strs("t", "")},
		}, `row 1: none of "prompt"/"completion", "messages" or "text"`},
		{"messages is a string", []ParquetColumn{
			{Name: "messages", Strings: strs("hi")},
		}, `row 1: "messages" is utf8, want a list of messages`},
		{"empty conversation", []ParquetColumn{
			{Name: "messages", Messages: [][]chat.Message{msgs("assistant", "a"), {}}},
		}, `row 2: "messages" is empty`},
		{"ends with user", []ParquetColumn{
			{Name: "messages", Messages: [][]chat.Message{msgs("user", "q", "assistant", "a", "user", "q2")}},
		}, `row 1: "messages" does not end with an assistant turn (last role is "user")`},
		{"unknown role", []ParquetColumn{
			{Name: "messages", Messages: [][]chat.Message{msgs("assistant", "a"), msgs("user", "q", "bot", "a")}},
		}, `row 2: "messages"[1]: unknown role "bot" (want system, user, assistant or model)`},
		{"empty final turn", []ParquetColumn{
			{Name: "messages", Messages: [][]chat.Message{msgs("user", "q", "model", "")}},
		}, `row 1: "messages": final assistant turn is empty`},
		{"completion not UTF-8", []ParquetColumn{
			{Name: "prompt", Strings: strs("p", "q")},
			{Name: "completion", Strings: strs("c", "caf\xe9")},
		}, `row 2: "completion" is not UTF-8 text: byte 4 is 0xe9`},
		{"message content not UTF-8", []ParquetColumn{
			{Name: "messages", Messages: [][]chat.Message{msgs("user", "q\xff", "assistant", "a")}},
		}, `row 1: "messages"[0]: "content" is not UTF-8 text: byte 2 is 0xff`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "train.parquet")
			writeParquet(t, path, tt.cols...)
			_, err := ReadFile(path, Options{})
			if got, want := errString(err), "data: train.parquet: "+tt.problem; got != want {
				t.Errorf("error = %s\n           want %s", got, want)
			}
		})
	}
}

func TestSkipBadRows(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "train.jsonl")
	writeFile(t, path, `{"text":"a"}
{"prompt":"p"}

{"prompt":"p","completion":"c"}
{not json
{"messages":[{"role":"user","content":"q"}]}
`)
	_, err := ReadFile(path, Options{})
	if got, want := errString(err), `data: train.jsonl:2: missing "completion"`; got != want {
		t.Fatalf("without SkipBadRows: err = %s, want %s", got, want)
	}
	s, err := ReadFile(path, Options{SkipBadRows: true})
	if err != nil {
		t.Fatal(err)
	}
	// Six lines, one blank: five rows, of which lines 2, 5 and 6 are bad. Kept examples
	// are renumbered 0, 1 but keep their lines 1 and 4.
	checkExamples(t, s.Examples, []Example{
		{Index: 0, Line: 1, Completion: "a"},
		{Index: 1, Line: 4, Prompt: user("p"), Completion: "c"},
	})
	if s.Stats.Rows != 5 || s.Stats.Skipped != 3 {
		t.Errorf("stats = %+v, want Rows 5, Skipped 3", s.Stats)
	}
	wantReasons := []string{
		`data: train.jsonl:2: missing "completion"`,
		`data: train.jsonl:5: invalid JSON at byte 2: invalid character 'n' looking for beginning of object key string`,
		`data: train.jsonl:6: "messages" does not end with an assistant turn (last role is "user")`,
	}
	var got []string
	for _, r := range s.Stats.Reasons {
		got = append(got, r.Error())
	}
	if !reflect.DeepEqual(got, wantReasons) {
		t.Errorf("reasons:\n got %q\nwant %q", got, wantReasons)
	}

	// Parquet rows are skipped the same way; row numbers (from 1) stay those of the file.
	pq := filepath.Join(dir, "train.parquet")
	writeParquet(t, pq, ParquetColumn{Name: "text", Strings: strs("", "b", "", "d")})
	ps, err := ReadFile(pq, Options{SkipBadRows: true})
	if err != nil {
		t.Fatal(err)
	}
	checkExamples(t, ps.Examples, []Example{{Index: 0, Line: 2, Completion: "b"}, {Index: 1, Line: 4, Completion: "d"}})
	if ps.Stats.Rows != 4 || ps.Stats.Skipped != 2 || len(ps.Stats.Reasons) != 2 ||
		ps.Stats.Reasons[1].Error() != `data: train.parquet: row 3: empty "text"` {
		t.Errorf("parquet stats = %+v", ps.Stats)
	}
}

// Reasons stop at MaxReasons while the count goes on.
func TestSkipBadRowsReasonsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valid.jsonl")
	writeFile(t, path, `{"text":"kept"}`+"\n"+strings.Repeat(`{"text":""}`+"\n", MaxReasons+3))
	s, err := ReadFile(path, Options{SkipBadRows: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Stats.Skipped != MaxReasons+3 || len(s.Stats.Reasons) != MaxReasons || len(s.Examples) != 1 {
		t.Errorf("stats = Skipped %d, %d reasons, %d examples; want %d, %d, 1",
			s.Stats.Skipped, len(s.Stats.Reasons), len(s.Examples), MaxReasons+3, MaxReasons)
	}
}

// Lines far beyond bufio.Scanner's 64 KiB default must read whole.
func TestLongLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "train.jsonl")
	long := strings.Repeat("abcdefgh", 50_000) // 400,000 bytes
	writeFile(t, path, `{"prompt":"`+long+`","completion":"`+long[:70_000]+`"}`+"\n"+`{"text":"after"}`+"\n")
	got := readOne(t, path, Options{})
	checkExamples(t, got, []Example{
		{Index: 0, Line: 1, Prompt: user(long), Completion: long[:70_000]},
		{Index: 1, Line: 2, Completion: "after"},
	})
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "train.jsonl"), `{"text":"a"}`+"\n"+`{"text":"b"}`+"\n")
	writeFile(t, filepath.Join(dir, "valid.jsonl"), "") // an empty valid split is allowed
	writeParquet(t, filepath.Join(dir, "test.parquet"), ParquetColumn{Name: "text", Strings: strs("c")})
	writeFile(t, filepath.Join(dir, "notes.txt"), "ignored")
	d, err := LoadDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Train.Name != "train" || len(d.Train.Examples) != 2 || d.Train.Path != filepath.Join(dir, "train.jsonl") {
		t.Errorf("train = %+v", d.Train)
	}
	if d.Valid == nil || d.Valid.Name != "valid" || len(d.Valid.Examples) != 0 {
		t.Errorf("valid = %+v", d.Valid)
	}
	if d.Test == nil || d.Test.Name != "test" || !reflect.DeepEqual(d.Test.Examples, []Example{{Line: 1, Completion: "c"}}) {
		t.Errorf("test = %+v", d.Test)
	}
	if s, err := d.Split("test"); err != nil || s != d.Test {
		t.Errorf("Split(test) = %p, %v; want %p", s, err, d.Test)
	}

	// Only train present.
	dir2 := t.TempDir()
	writeParquet(t, filepath.Join(dir2, "train.parquet"), ParquetColumn{Name: "text", Strings: strs("a")})
	d2, err := LoadDir(dir2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d2.Valid != nil || d2.Test != nil {
		t.Errorf("absent splits: valid %v, test %v; want nil", d2.Valid, d2.Test)
	}
	_, err = d2.Split("valid")
	if got, want := errString(err), `data: no valid.jsonl or valid.parquet in "`+dir2+`"`; got != want {
		t.Errorf("Split(valid) err = %s, want %s", got, want)
	}
	_, err = d2.Split("dev")
	if got, want := errString(err), `data: unknown split "dev" (want train, valid or test)`; got != want {
		t.Errorf("Split(dev) err = %s, want %s", got, want)
	}
}

func TestLoadDirErrors(t *testing.T) {
	root := t.TempDir()
	mk := func(name string, files map[string]string) string {
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, content := range files {
			if content == "<dir>" {
				if err := os.Mkdir(filepath.Join(dir, f), 0o755); err != nil {
					t.Fatal(err)
				}
				continue
			}
			writeFile(t, filepath.Join(dir, f), content)
		}
		return dir
	}
	missing := filepath.Join(root, "missing")
	notDir := filepath.Join(root, "file")
	writeFile(t, notDir, "")
	noTrain := mk("notrain", map[string]string{"valid.jsonl": `{"text":"a"}`})
	both := mk("both", map[string]string{"train.jsonl": `{"text":"a"}`, "train.parquet": ""})
	bothValid := mk("bothvalid", map[string]string{"train.jsonl": `{"text":"a"}`, "valid.jsonl": "", "valid.parquet": ""})
	empty := mk("empty", map[string]string{"train.jsonl": ""})
	blank := mk("blank", map[string]string{"train.jsonl": "\n  \n\n"})
	allBad := mk("allbad", map[string]string{"train.jsonl": `{"text":""}` + "\n" + `{"x":1}` + "\n"})
	trainDir := mk("traindir", map[string]string{"train.jsonl": "<dir>"})
	badValid := mk("badvalid", map[string]string{"train.jsonl": `{"text":"a"}`, "valid.jsonl": `{"text":1}`})
	notParquet := mk("notparquet", map[string]string{"train.parquet": "this is not parquet"})

	tests := []struct {
		dir  string
		opts Options
		want string
	}{
		{missing, Options{}, `data: data directory "` + missing + `": file does not exist`},
		{notDir, Options{}, `data: ` + notDir + ` is a file, not a data directory: pass its directory (` + filepath.Dir(notDir) + `), which holds train, valid and test .jsonl or .parquet`},
		{noTrain, Options{}, `data: no train.jsonl or train.parquet in "` + noTrain + `"`},
		{both, Options{}, `data: both train.jsonl and train.parquet in "` + both + `"; keep one`},
		{bothValid, Options{}, `data: both valid.jsonl and valid.parquet in "` + bothValid + `"; keep one`},
		{empty, Options{}, `data: ` + filepath.Join(empty, "train.jsonl") + ` has no examples`},
		{blank, Options{}, `data: ` + filepath.Join(blank, "train.jsonl") + ` has no examples`},
		{allBad, Options{SkipBadRows: true}, `data: ` + filepath.Join(allBad, "train.jsonl") +
			` has no examples: all 2 rows were bad and skipped, the first: data: train.jsonl:1: empty "text"`},
		{trainDir, Options{}, `data: ` + filepath.Join(trainDir, "train.jsonl") + ` is a directory, want a file`},
		{badValid, Options{}, `data: valid.jsonl:1: "text" is a number, want a string`},
	}
	for _, tt := range tests {
		_, err := LoadDir(tt.dir, tt.opts)
		if got := errString(err); got != tt.want {
			t.Errorf("LoadDir(%s) error = %s\n                          want %s", filepath.Base(tt.dir), got, tt.want)
		}
	}
	if _, err := LoadDir(missing, Options{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing dir: %v is not fs.ErrNotExist", err)
	}
	// A non-parquet file is an error naming it (the parquet library's words follow).
	_, err := LoadDir(notParquet, Options{})
	if prefix := `data: ` + filepath.Join(notParquet, "train.parquet") + `: not a readable parquet file: `; !strings.HasPrefix(errString(err), prefix) {
		t.Errorf("not parquet: err = %v, want prefix %s", err, prefix)
	}
}

func TestReadFileUnknownType(t *testing.T) {
	path := filepath.Join(t.TempDir(), "train.csv")
	writeFile(t, path, "a,b\n")
	_, err := ReadFile(path, Options{})
	if got, want := errString(err), `data: `+path+`: unknown file type ".csv" (want .jsonl or .parquet)`; got != want {
		t.Errorf("err = %s, want %s", got, want)
	}
}

// Load opens only the splits asked for: a directory holding a test split alone is
// enough to score it, and a broken train file next to it is never read.
func TestLoadOnlyNeededSplits(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "test.jsonl"), `{"prompt":"p","completion":"c"}`+"\n")
	d, err := Load(dir, Options{}, Need{Required: []string{"test"}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Train != nil || d.Valid != nil || d.Test == nil || len(d.Test.Examples) != 1 {
		t.Fatalf("dataset = train %v, valid %v, test %v; want the test split only", d.Train, d.Valid, d.Test)
	}
	writeFile(t, filepath.Join(dir, "train.jsonl"), "this is not json\n")
	writeFile(t, filepath.Join(dir, "valid.parquet"), "nor is this parquet")
	if _, err := Load(dir, Options{}, Need{Required: []string{"test"}}); err != nil {
		t.Errorf("test split with a broken train file beside it: %v", err)
	}
	// Training needs train, so the broken file is an error there.
	if _, err := Load(dir, Options{}, Need{Required: []string{"train"}, Optional: []string{"valid"}}); err == nil || !strings.Contains(err.Error(), "train.jsonl:1") {
		t.Errorf("NeedTrain over a broken train.jsonl: err = %v, want one naming train.jsonl:1", err)
	}

	only := t.TempDir()
	writeFile(t, filepath.Join(only, "train.jsonl"), `{"text":"a"}`+"\n")
	writeFile(t, filepath.Join(only, "test.jsonl"), "")
	tests := []struct {
		need Need
		want string
	}{
		{Need{Required: []string{"valid"}}, `data: no valid.jsonl or valid.parquet in "` + only + `"`},
		{Need{Required: []string{"test"}}, `data: ` + filepath.Join(only, "test.jsonl") + ` has no examples`},
		{Need{Optional: []string{"dev"}}, `data: unknown split "dev" (want train, valid or test)`},
	}
	for _, tt := range tests {
		if _, err := Load(only, Options{}, tt.need); errString(err) != tt.want {
			t.Errorf("Load(%+v) error = %s, want %s", tt.need, errString(err), tt.want)
		}
	}
	// An optional split may be absent or empty.
	d, err = Load(only, Options{}, Need{Required: []string{"train"}, Optional: []string{"valid", "test"}})
	if err != nil || d.Valid != nil || d.Test == nil || len(d.Test.Examples) != 0 {
		t.Errorf("optional splits: %+v, %v", d, err)
	}
}
