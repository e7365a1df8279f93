package data

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/dgtune/dgtune/data/chat"
)

// parquetBatchRows bounds the rows decoded at once, so a large file is never held as
// arrow arrays in full next to the examples made from it.
const parquetBatchRows = 4096

// readParquet feeds every row of a .parquet file to c, reading only the feature
// columns (a dataset may carry unrelated wide columns, such as images).
func readParquet(path string, c *collector) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return fmt.Errorf("data: %s: not a readable parquet file: %w", path, err)
	}
	wanted := map[string]bool{c.feat.prompt: true, c.feat.completion: true, c.feat.text: true, c.feat.chat: true}
	sc := pf.MetaData().Schema
	var leaves []int
	for i := range sc.NumColumns() {
		if wanted[sc.ColumnRoot(i).Name()] {
			leaves = append(leaves, i)
		}
	}
	if len(leaves) == 0 {
		// No feature column at all: every row is bad in the same way.
		for i := range int(pf.NumRows()) {
			if err := c.add(arrowRow{}, i+1); err != nil {
				return err
			}
		}
		return nil
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: parquetBatchRows}, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("data: %s: %w", path, err)
	}
	rr, err := fr.GetRecordReader(context.Background(), leaves, nil)
	if err != nil {
		return fmt.Errorf("data: %s: %w", path, err)
	}
	defer rr.Release()
	next := 1 // rows count from 1, as jsonl lines do
	for rr.Next() {
		rec := rr.RecordBatch()
		cols := make(map[string]arrow.Array, rec.NumCols())
		for i, fld := range rec.Schema().Fields() {
			cols[fld.Name] = rec.Column(i)
		}
		for i := range int(rec.NumRows()) {
			if err := c.add(arrowRow{cols: cols, i: i}, next); err != nil {
				return err
			}
			next++
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("data: %s: row %d: %w", path, next, err)
	}
	return nil
}

// arrowRow is row i of a set of named arrow columns: a parquet row, or (for the fields
// of a message) one element of a struct array. Strings are cloned because arrow's
// values alias its buffers.
type arrowRow struct {
	cols map[string]arrow.Array
	i    int
}

func (r arrowRow) has(name string) bool {
	a, ok := r.cols[name]
	return ok && a.IsValid(r.i)
}

func (r arrowRow) str(name string) (string, error) {
	a := r.cols[name]
	i := r.i
	if d, ok := a.(*array.Dictionary); ok { // pandas categoricals arrive dictionary-encoded
		a, i = d.Dictionary(), d.GetValueIndex(i)
	}
	s, ok := a.(array.StringLike)
	if !ok {
		return "", fmt.Errorf("%q is %s, want a string", name, r.cols[name].DataType())
	}
	v := s.Value(i)
	if at := invalidUTF8([]byte(v)); at >= 0 {
		return "", fmt.Errorf("%q is not UTF-8 text: byte %d is 0x%02x", name, at+1, v[at])
	}
	return strings.Clone(v), nil
}

func (r arrowRow) messages(name string) ([]message, error) {
	l, ok := r.cols[name].(array.ListLike)
	if !ok {
		return nil, fmt.Errorf("%q is %s, want a list of messages", name, r.cols[name].DataType())
	}
	start, end := l.ValueOffsets(r.i)
	vals := l.ListValues()
	st, ok := vals.(*array.Struct)
	if !ok && end > start {
		return nil, fmt.Errorf("%q[0] is %s, want an object", name, vals.DataType())
	}
	var fields map[string]arrow.Array
	if ok {
		fields = structFields(st)
	}
	msgs := make([]message, 0, end-start)
	for j := start; j < end; j++ {
		k := len(msgs)
		if st.IsNull(int(j)) {
			return nil, fmt.Errorf("%q[%d] is null, want an object", name, k)
		}
		m, err := messageFrom(arrowRow{cols: fields, i: int(j)})
		if err != nil {
			return nil, fmt.Errorf("%q[%d]: %w", name, k, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

func (r arrowRow) isList(name string) bool {
	_, ok := r.cols[name].(array.ListLike)
	return ok
}

func (r arrowRow) parts(name string) ([]part, error) {
	l := r.cols[name].(array.ListLike)
	start, end := l.ValueOffsets(r.i)
	vals := l.ListValues()
	st, ok := vals.(*array.Struct)
	if !ok && end > start {
		return nil, fmt.Errorf("%q[0] is %s, want a part struct", name, vals.DataType())
	}
	fields := structFields(st)
	ps := make([]part, 0, end-start)
	for j := start; j < end; j++ {
		k := len(ps)
		if st.IsNull(int(j)) {
			return nil, fmt.Errorf("%q[%d] is null, want a part struct", name, k)
		}
		p, err := partFrom(arrowRow{cols: fields, i: int(j)})
		if err != nil {
			return nil, fmt.Errorf("%q[%d]: %w", name, k, err)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// binary reads a binary value, or the "bytes" of a struct such as HF's Image feature
// (struct<bytes: binary, path: string>). The bytes are copied out of arrow's buffers.
func (r arrowRow) binary(name string) ([]byte, bool) {
	switch a := r.cols[name].(type) {
	case *array.Struct:
		inner := arrowRow{cols: structFields(a), i: r.i}
		if !inner.has("bytes") {
			return nil, false
		}
		return inner.binary("bytes")
	case interface{ Value(int) []byte }:
		return bytes.Clone(a.Value(r.i)), true
	}
	return nil, false
}

// structFields names the child arrays of a struct array (nil for nil).
func structFields(st *array.Struct) map[string]arrow.Array {
	if st == nil {
		return nil
	}
	typ := st.DataType().(*arrow.StructType)
	fields := make(map[string]arrow.Array, st.NumField())
	for j := range st.NumField() {
		fields[typ.Field(j).Name] = st.Field(j)
	}
	return fields
}

// ParquetColumn is one column for WriteParquet: a string column (Strings) or a
// conversation column (Messages, written as list<struct<role: string, content:
// string>>). Null, when set, has one entry per row and writes true entries as null,
// which the readers treat as an absent field.
type ParquetColumn struct {
	Name     string
	Strings  []string
	Messages [][]chat.Message
	Null     []bool
}

func (c ParquetColumn) rows() int {
	if c.Messages != nil {
		return len(c.Messages)
	}
	return len(c.Strings)
}

// WriteParquet writes the columns as one parquet file to w, in the schema the readers
// expect. It does not close w.
func WriteParquet(w io.Writer, cols ...ParquetColumn) error {
	if len(cols) == 0 {
		return errors.New("data: write parquet: no columns")
	}
	fields := make([]arrow.Field, len(cols))
	seen := map[string]bool{}
	n := cols[0].rows()
	for i, c := range cols {
		switch {
		case c.Name == "":
			return fmt.Errorf("data: write parquet: column %d has no name", i)
		case seen[c.Name]:
			return fmt.Errorf("data: write parquet: column %q given twice", c.Name)
		case (c.Strings == nil) == (c.Messages == nil):
			return fmt.Errorf("data: write parquet: column %q must set exactly one of Strings and Messages", c.Name)
		case c.rows() != n:
			return fmt.Errorf("data: write parquet: column %q has %d rows, column %q has %d", c.Name, c.rows(), cols[0].Name, n)
		case c.Null != nil && len(c.Null) != n:
			return fmt.Errorf("data: write parquet: column %q has %d null flags for %d rows", c.Name, len(c.Null), n)
		}
		seen[c.Name] = true
		typ := arrow.DataType(arrow.BinaryTypes.String)
		if c.Messages != nil {
			typ = arrow.ListOf(arrow.StructOf(
				arrow.Field{Name: "role", Type: arrow.BinaryTypes.String, Nullable: true},
				arrow.Field{Name: "content", Type: arrow.BinaryTypes.String, Nullable: true},
			))
		}
		fields[i] = arrow.Field{Name: c.Name, Type: typ, Nullable: true}
	}
	schema := arrow.NewSchema(fields, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	for i, c := range cols {
		null := func(r int) bool { return c.Null != nil && c.Null[r] }
		if c.Messages == nil {
			sb := rb.Field(i).(*array.StringBuilder)
			for r, s := range c.Strings {
				if null(r) {
					sb.AppendNull()
				} else {
					sb.Append(s)
				}
			}
			continue
		}
		lb := rb.Field(i).(*array.ListBuilder)
		stb := lb.ValueBuilder().(*array.StructBuilder)
		role, content := stb.FieldBuilder(0).(*array.StringBuilder), stb.FieldBuilder(1).(*array.StringBuilder)
		for r, conv := range c.Messages {
			if null(r) {
				lb.AppendNull()
				continue
			}
			lb.Append(true)
			for _, m := range conv {
				stb.Append(true)
				role.Append(m.Role)
				content.Append(m.Content)
			}
		}
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	// The parquet writer closes a sink that is an io.Closer; hide Close so the caller
	// keeps ownership of w.
	fw, err := pqarrow.NewFileWriter(schema, struct{ io.Writer }{w}, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		return fmt.Errorf("data: write parquet: %w", err)
	}
	if err := fw.Write(rec); err != nil {
		fw.Close()
		return fmt.Errorf("data: write parquet: %w", err)
	}
	if err := fw.Close(); err != nil {
		return fmt.Errorf("data: write parquet: %w", err)
	}
	return nil
}

// WriteParquetFile writes the columns to a new file at path (see WriteParquet).
func WriteParquetFile(path string, cols ...ParquetColumn) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if err := WriteParquet(f, cols...); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	return nil
}
