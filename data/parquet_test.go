package data

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/dgtune/dgtune/data/chat"
)

// writeRecord writes a parquet file with any arrow schema, for column types that
// WriteParquet deliberately cannot produce.
func writeRecord(t *testing.T, path string, fields []arrow.Field, build func(rb *array.RecordBuilder)) {
	t.Helper()
	schema := arrow.NewSchema(fields, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	build(rb)
	rec := rb.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(schema, &buf, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, buf.String())
}

func str(name string) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true}
}

// Column types other than those WriteParquet writes: accepted where they still hold
// strings (large_string, dictionary-encoded strings), reported per row otherwise.
func TestParquetColumnTypes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "train.parquet")

	t.Run("large_string and dictionary", func(t *testing.T) {
		dictType := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
		writeRecord(t, path, []arrow.Field{
			{Name: "prompt", Type: arrow.BinaryTypes.LargeString},
			{Name: "completion", Type: dictType},
		}, func(rb *array.RecordBuilder) {
			rb.Field(0).(*array.LargeStringBuilder).AppendValues([]string{"p0", "p1", "p2"}, nil)
			db := rb.Field(1).(*array.BinaryDictionaryBuilder)
			for _, s := range []string{"yes", "no", "yes"} {
				if err := db.AppendString(s); err != nil {
					t.Fatal(err)
				}
			}
		})
		checkExamples(t, readOne(t, path, Options{}), []Example{
			{Index: 0, Line: 1, Prompt: user("p0"), Completion: "yes"},
			{Index: 1, Line: 2, Prompt: user("p1"), Completion: "no"},
			{Index: 2, Line: 3, Prompt: user("p2"), Completion: "yes"},
		})
	})

	roleContent := arrow.StructOf(str("role"), str("content"))
	tests := []struct {
		name   string
		fields []arrow.Field
		build  func(rb *array.RecordBuilder)
		want   string
	}{
		{"int prompt", []arrow.Field{{Name: "prompt", Type: arrow.PrimitiveTypes.Int64}, str("completion")},
			func(rb *array.RecordBuilder) {
				rb.Field(0).(*array.Int64Builder).Append(3)
				rb.Field(1).(*array.StringBuilder).Append("c")
			}, `data: train.parquet: row 1: "prompt" is int64, want a string`},
		{"list of ints", []arrow.Field{{Name: "messages", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}},
			func(rb *array.RecordBuilder) {
				lb := rb.Field(0).(*array.ListBuilder)
				lb.Append(true)
				lb.ValueBuilder().(*array.Int64Builder).Append(1)
			}, `data: train.parquet: row 1: "messages"[0] is int64, want an object`},
		{"null message", []arrow.Field{{Name: "messages", Type: arrow.ListOf(roleContent)}},
			func(rb *array.RecordBuilder) {
				lb := rb.Field(0).(*array.ListBuilder)
				sb := lb.ValueBuilder().(*array.StructBuilder)
				lb.Append(true)
				sb.Append(true)
				sb.FieldBuilder(0).(*array.StringBuilder).Append("user")
				sb.FieldBuilder(1).(*array.StringBuilder).Append("q")
				sb.AppendNull()
			}, `data: train.parquet: row 1: "messages"[1] is null, want an object`},
		{"no content field", []arrow.Field{{Name: "messages", Type: arrow.ListOf(arrow.StructOf(str("role")))}},
			func(rb *array.RecordBuilder) {
				lb := rb.Field(0).(*array.ListBuilder)
				sb := lb.ValueBuilder().(*array.StructBuilder)
				lb.Append(true)
				sb.Append(true)
				sb.FieldBuilder(0).(*array.StringBuilder).Append("assistant")
			}, `data: train.parquet: row 1: "messages"[0]: missing "content"`},
		{"null role", []arrow.Field{{Name: "messages", Type: arrow.ListOf(roleContent)}},
			func(rb *array.RecordBuilder) {
				lb := rb.Field(0).(*array.ListBuilder)
				sb := lb.ValueBuilder().(*array.StructBuilder)
				lb.Append(true)
				sb.Append(true)
				sb.FieldBuilder(0).(*array.StringBuilder).AppendNull()
				sb.FieldBuilder(1).(*array.StringBuilder).Append("a")
			}, `data: train.parquet: row 1: "messages"[0]: missing "role"`},
		{"int role", []arrow.Field{{Name: "messages", Type: arrow.ListOf(arrow.StructOf(
			arrow.Field{Name: "role", Type: arrow.PrimitiveTypes.Int32}, str("content")))}},
			func(rb *array.RecordBuilder) {
				lb := rb.Field(0).(*array.ListBuilder)
				sb := lb.ValueBuilder().(*array.StructBuilder)
				lb.Append(true)
				sb.Append(true)
				sb.FieldBuilder(0).(*array.Int32Builder).Append(2)
				sb.FieldBuilder(1).(*array.StringBuilder).Append("a")
			}, `data: train.parquet: row 1: "messages"[0]: "role" is int32, want a string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeRecord(t, path, tt.fields, tt.build)
			_, err := ReadFile(path, Options{})
			if got := errString(err); got != tt.want {
				t.Errorf("error = %s\n           want %s", got, tt.want)
			}
		})
	}
}

// Row numbering (from 1, as jsonl lines) runs on across the reader's batches: row 5001
// lies in the second batch of parquetBatchRows = 4096.
func TestParquetRowsAcrossBatches(t *testing.T) {
	const n = 5001
	texts := make([]string, n)
	for i := range texts {
		texts[i] = "t"
	}
	texts[n-1] = ""
	path := filepath.Join(t.TempDir(), "train.parquet")
	writeParquet(t, path, ParquetColumn{Name: "text", Strings: texts})
	_, err := ReadFile(path, Options{})
	if got, want := errString(err), `data: train.parquet: row 5001: empty "text"`; got != want {
		t.Errorf("err = %s, want %s", got, want)
	}
	s, err := ReadFile(path, Options{SkipBadRows: true})
	if err != nil {
		t.Fatal(err)
	}
	if last := s.Examples[len(s.Examples)-1]; len(s.Examples) != n-1 || last.Index != n-2 || last.Line != n-1 {
		t.Errorf("%d examples, last %+v; want %d, Index %d and Line %d", len(s.Examples), last, n-1, n-2, n-1)
	}
}

func TestWriteParquetErrors(t *testing.T) {
	tests := []struct {
		cols []ParquetColumn
		want string
	}{
		{nil, "data: write parquet: no columns"},
		{[]ParquetColumn{{Strings: strs("a")}}, "data: write parquet: column 0 has no name"},
		{[]ParquetColumn{{Name: "a", Strings: strs("a")}, {Name: "a", Strings: strs("b")}},
			`data: write parquet: column "a" given twice`},
		{[]ParquetColumn{{Name: "a"}}, `data: write parquet: column "a" must set exactly one of Strings and Messages`},
		{[]ParquetColumn{{Name: "a", Strings: strs("a"), Messages: [][]chat.Message{nil}}},
			`data: write parquet: column "a" must set exactly one of Strings and Messages`},
		{[]ParquetColumn{{Name: "a", Strings: strs("a", "b")}, {Name: "b", Strings: strs("c")}},
			`data: write parquet: column "b" has 1 rows, column "a" has 2`},
		{[]ParquetColumn{{Name: "a", Strings: strs("a", "b"), Null: []bool{true}}},
			`data: write parquet: column "a" has 1 null flags for 2 rows`},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		if got := errString(WriteParquet(&buf, tt.cols...)); got != tt.want {
			t.Errorf("WriteParquet(%+v) = %s, want %s", tt.cols, got, tt.want)
		}
	}
}

// WriteParquet must leave a writer it was given open: the caller owns it.
func TestWriteParquetLeavesFileOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "train.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteParquet(f, ParquetColumn{Name: "text", Strings: strs("a")}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("closing the file after WriteParquet: %v (WriteParquet closed it)", err)
	}
	checkExamples(t, readOne(t, path, Options{}), []Example{{Line: 1, Completion: "a"}})
}
